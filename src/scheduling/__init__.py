"""A PostgreSQL-backed scheduling control plane for durable agent runs."""

__version__ = "0.1.0"
