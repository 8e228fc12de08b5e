"""Shared test data (on sys.path through pytest's ``pythonpath`` setting)."""
