"""Benchmarks run with `make bench` (pytest-benchmark); the unit-test run never collects them."""
