"""Time-stepping helpers shared by the analyses: the time grid, chunked runs with progress,
and start checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import is_traced
from .errors import ModelError
from .model import Model


def num_steps(t_end, h) -> int:
    """N = round(t_end / h); the grid is t = k h, k = 0..N (API contract)."""
    if not (float(h) > 0):
        raise ValueError(f"step size h must be positive, got {h!r}")
    if not (float(t_end) >= 0):
        raise ValueError(f"t_end must be non-negative, got {t_end!r}")
    return int(round(float(t_end) / float(h)))


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
