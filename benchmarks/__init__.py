"""herald's benchmark harness: ``python -m benchmarks`` (see README.md)."""
