"""One BLAS thread for the LAPACK kernels inside jaxmbd's compiled programs.

jax's CPU LAPACK custom calls (getrf, gesdd, potrf, ...: every dense solve, SVD and
least-squares of a step) run in scipy's OpenBLAS, which by default starts one thread per
core that busy-waits for work. Inside an XLA program, whose own thread pool already holds
the cores, those threads compete with XLA's and with each other, and a factorisation of a
hundred unknowns, below the size where a second thread could pay off, stalls. Measured on
this project's 2-core CPU (shared, load average 10.7; ``benchmarks/blas_threads.py``,
wall time, one thread against two): a 138 x 138 SVD 22 ms against 1.33 s; the 3-box
hard-contact stack 2.9 against 62 ms per step; a 20-link chain's dense generalized-alpha
step 4.3 against 10.7 ms; a 138 x 138 LU solve 3.2 against 4.6 ms.

:func:`configure` runs when jaxmbd is imported. scipy's OpenBLAS is loaded lazily, at JAX's
first LAPACK call, and reads ``OPENBLAS_NUM_THREADS`` then:

* a thread count set by the user (``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or
  ``OMP_NUM_THREADS``) is kept, as is everything with ``JAXMBD_BLAS_THREADS=0``;
* otherwise, while ``scipy.linalg`` is not imported yet, ``OPENBLAS_NUM_THREADS=1`` is set
  (after numpy has loaded its own OpenBLAS copy, which keeps its threads; subprocesses
  inherit the variable);
* if ``scipy.linalg`` is already imported, its OpenBLAS is limited to one thread through
  ``threadpoolctl``.
"""

from __future__ import annotations

import os
import sys

import numpy  # noqa: F401  (loads numpy's own BLAS first: the variable below spares it)

#: ``JAXMBD_BLAS_THREADS=0`` leaves BLAS threading alone.
OPT_OUT = "JAXMBD_BLAS_THREADS"
USER_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _limit_loaded_scipy_blas() -> str:
    """Limit the BLAS libraries that scipy has loaded already to one thread."""
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    # scipy's own copy where it has one (numpy's keeps its threads), else the shared one
    own = [lib for lib in blas if "scipy" in os.path.basename(os.path.dirname(lib.filepath))]
    for lib in own or blas:
        lib.set_num_threads(1)
    return "limited"


def configure() -> str:
    """Give jax's LAPACK kernels one BLAS thread where the user has not chosen; returns
    what happened: "user", "opt-out", "set" (the variable, before scipy loads its BLAS) or
    "limited" (scipy's loaded BLAS, by threadpoolctl)."""
    if any(os.environ.get(name, "").strip() for name in USER_VARIABLES):
        return "user"
    if os.environ.get(OPT_OUT, "").strip() == "0":
        return "opt-out"
    if "scipy.linalg" not in sys.modules:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        return "set"
    return _limit_loaded_scipy_blas()


configure()  # at import: jaxmbd/__init__.py imports this module before anything else
