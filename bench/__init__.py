"""Benchmarks: figures for reports, never timed asserts. Run `python -m bench --help`."""
