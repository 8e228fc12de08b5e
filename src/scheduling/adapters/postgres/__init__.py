"""PostgreSQL adapters: tables, migrations, repositories, unit of work, roles."""
