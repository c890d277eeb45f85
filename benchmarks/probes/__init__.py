"""One-off probes and diagnostics behind single design decisions (``python -m
benchmarks.probes.NAME``); they print their findings and write no results file."""
