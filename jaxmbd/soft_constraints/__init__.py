"""MuJoCo's soft constraint model: the constraint rows, their impedance and regulariser, the convex
solve. Modules here import only jax, numpy, equinox and ``jaxmbd._config``; this file imports none
of them, so the rows (:mod:`.rows`, :mod:`.parameters`) and the solver load independently."""
