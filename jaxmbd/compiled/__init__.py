"""The compilation and batching machinery: jit with a program cache, XLA flags,
BLAS threads, host arrays, batch lanes and tiles, and the small dense kernels that
compile to native loops. The bottom layer: it imports nothing of jaxmbd but _config."""
