"""Pytest fixtures that hand each test a real PostgreSQL database (being built)."""
