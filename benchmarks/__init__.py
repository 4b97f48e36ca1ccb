"""Benchmarks (not part of the test suite): run them as ``python -m benchmarks.<name>``."""
