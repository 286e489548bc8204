"""Speed benchmarks for kvlint and the runtime guard: ``python -m benchmarks``."""
