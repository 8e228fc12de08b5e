"""One PostgreSQL provider for tests, gates, the simulator and benchmarks."""
