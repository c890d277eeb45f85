"""Time-stepping helpers shared by the analyses: the time grid, chunked runs with progress,
and start checks."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import is_traced
from .errors import ModelError
from .model import Model

# most steps of one run: every step's state is kept (about 1 kB per step for a few bodies),
# so a mistyped t_end or h would otherwise allocate without bound
MAX_STEPS = 10**7


def num_steps(t_end, h) -> int:
    """N = round(t_end / h); the grid is t = k h, k = 0..N (API contract); at most
    MAX_STEPS."""
    try:
        h_, t_end_ = float(h), float(t_end)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"h and t_end must be numbers, got h={h!r}, t_end={t_end!r}") from None
    if not (math.isfinite(h_) and h_ > 0):
        raise ValueError(f"step size h must be positive and finite, got {h!r}")
    if not (math.isfinite(t_end_) and t_end_ >= 0):
        raise ValueError(f"t_end must be non-negative and finite, got {t_end!r}")
    n = t_end_ / h_
    if not n <= MAX_STEPS:
        raise ValueError(
            f"t_end / h = {n:.3g} steps; at most {MAX_STEPS:.0e} per run (every step is "
            "stored): split the run into pieces or use a larger step"
        )
    return int(round(n))


def run_in_chunks(initial, chunk, n: int, chunk_size: int, progress):
    """Run ``chunk`` repeatedly with one fixed size (one compilation), reporting progress.

    The last chunk may run past step n; its extra steps are dropped.
    """
    carry, first = initial()
    pieces = [jax.tree_util.tree_map(lambda x: x[None], first)]
    size = max(1, min(chunk_size, n))
    done = 0
    while done < n:
        carry, out = chunk(carry, jnp.asarray(done), size)
        keep = min(size, n - done)
        pieces.append(jax.tree_util.tree_map(lambda x, keep=keep: x[:keep], out))
        done += keep
        progress(done, n)
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0), *pieces)


def check_euler_angle_start(model: Model, form):
    if form.name != "re" or is_traced(model):
        return
    eps = np.asarray(form.coordinates(model.A0))
    s = np.abs(np.sin(eps[:, 1]))
    for b, val in enumerate(s):
        if val < 1e-3:
            raise ModelError(
                f"model '{model.name}', body '{model.body_names[b]}': its initial orientation is "
                f"at the ZXZ Euler-angle singularity (theta = {np.degrees(eps[b, 1]):.4g} deg); "
                "the re formulation cannot represent it. Use formulation 'rA' or 'rp', or "
                "choose body frames whose z axis is not the rotation axis' singular direction."
            )
