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
