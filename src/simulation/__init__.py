"""The deterministic simulator and the real-PostgreSQL world it runs against."""
