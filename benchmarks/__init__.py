"""Benchmarks and studies of jaxmbd: run each as ``python -m benchmarks.NAME`` from the
repository root (README.md in this folder lists them)."""
