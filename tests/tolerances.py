"""Tolerances the suite shares, each named for why it is what it is.

A test's own tolerance sits within 10x of what it achieves on this machine
(``tests/tolerance_log.py`` measures it); these are the floors below which a measured value
says nothing about the code."""

from __future__ import annotations

#: Round-off of a float64 result reached by another path to the same value (a ``vmap``
#: against a loop, a jitted call against a plain one, another fusion or summation order
#: of XLA, another CPU's vector width): a few tens of ulps of the values' scale, relative.
#: A comparison that achieves exact equality here, but not by construction, allows this.
ROUND_OFF = 1e-14

#: Relative agreement of index-3 multipliers from two factorisations of the same Newton
#: matrix (LAPACK's and the structured or elementwise one), and of the gradients of a loss
#: on them: the multipliers are the positions' accelerations over h^2 (gen_alpha: over
#: beta h^2), so the matrix's condition, and the last bits two factorisations round
#: differently, grow as 1/h^2 (h = 2e-3: 1.8e-12 relative, where the positions agree to
#: 1e-16).
INDEX3_MULTIPLIERS = 1e-11
