"""Time-stepping helpers shared by the analyses: the time grid, chunked runs with progress,
and start checks."""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import is_traced
from .._results import first_failure
from ..compiled.counted_scan import counted_scan
from ..errors import AdjustmentWarning, ModelError
from ..model import Model

# most saved rows of one run: every saved step's state is kept (about 1 kB per step for a few
# bodies), so a mistyped t_end or h would otherwise allocate without bound; save_every=k
# lets a run take k times as many steps
MAX_STEPS = 10**7


def num_steps(t_end, h, *, stacklevel: int = 3) -> int:
    """N = round(t_end / h); the grid is t = k h, k = 0..N (API contract); at most
    MAX_STEPS. A t_end off the grid (beyond round-off) warns with the end time used
    (:class:`~jaxmbd.AdjustmentWarning`; naming the frame ``stacklevel`` counted as
    :func:`warnings.warn` counts: by default the analysis's caller)."""
    try:
        h_, t_end_ = float(h), float(t_end)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"h and t_end must be numbers, got h={h!r}, t_end={t_end!r}") from None
    if not (math.isfinite(h_) and h_ > 0):
        raise ValueError(f"step size h must be positive and finite, got {h!r}")
    if not (math.isfinite(t_end_) and t_end_ >= 0):
        raise ValueError(f"t_end must be non-negative and finite, got {t_end!r}")
    n = t_end_ / h_
    if not n <= MAX_STEPS * 10**5:
        raise ValueError(
            f"t_end / h = {n:.3g} steps; at most {MAX_STEPS * 10**5:.0e} per run (at most "
            f"{MAX_STEPS:.0e} saved rows, see save_every): check t_end and h"
        )
    steps = int(round(n))
    # a grid that misses t_end by more than round-off: say where the run really ends
    if abs(n - steps) > 1e-9 * max(n, 1.0):
        warnings.warn(
            f"t_end = {t_end_:.6g} is not a multiple of h = {h_:.6g} (t_end / h = {n:.6g}); "
            f"the run takes N = round(t_end / h) = {steps} steps and ends at t = N h = "
            f"{steps * h_:.6g}. Choose t_end = N h to silence this.",
            AdjustmentWarning,
            stacklevel=stacklevel,
        )
    return steps


def check_save_every(save_every, n: int) -> int:
    """``save_every`` as a positive int that divides the number of steps n."""
    if isinstance(save_every, bool) or not isinstance(save_every, int | np.integer):
        raise ValueError(f"save_every must be a positive integer, got {save_every!r}")
    save_every = int(save_every)
    if save_every < 1:
        raise ValueError(f"save_every must be a positive integer, got {save_every}")
    if n % save_every:
        raise ValueError(
            f"save_every={save_every} must divide the number of steps N = round(t_end / h) = "
            f"{n} (the saved grid is t = j * save_every * h)"
        )
    if n // save_every > MAX_STEPS:
        raise ValueError(
            f"t_end / h = {n:.3g} steps saved every {save_every}: {n // save_every:.3g} rows; "
            f"at most {MAX_STEPS:.0e} are stored per run: use save_every, split the run into "
            "pieces or use a larger step"
        )
    return save_every


#: How a strided scan summarises the steps between two saved rows, by output position:
#: iterations (max), status (the first failure), residual norm (max); other outputs are
#: the saved step's own.
SUMMARIES = {
    7: lambda x: jnp.max(x, 0),
    8: lambda x: first_failure(x, axis=0),
    9: lambda x: jnp.max(x, 0),
}


def strided_scan(step, carry, steps, save_every: int, summaries=None):
    """``lax.scan(step, carry, steps)`` that keeps every ``save_every``-th output only, so
    the stored history is len(steps) / save_every rows (memory flat in the number of steps
    for a fixed number of rows). The steps in between are not lost to the status: each
    saved row reports the first failure, the most Newton iterations and the largest residual
    since the previous saved row (``summaries``, by output position; default SUMMARIES)."""
    if save_every == 1:
        return jax.lax.scan(step, carry, steps)
    return jax.lax.scan(_summarised(step, summaries), carry, steps.reshape(-1, save_every))


def _summarised(step, summaries=None):
    """The scan body of ``save_every`` steps (their numbers ``ks``) giving one saved row:
    the last step's outputs, with the ``summaries`` (by output position; default
    SUMMARIES) of all of them."""
    summaries = SUMMARIES if summaries is None else summaries

    def segment(carry, ks):
        carry, outs = jax.lax.scan(step, carry, ks)
        saved = tuple(
            None
            if x is None
            else (
                summaries[i](x) if i in summaries else jax.tree_util.tree_map(lambda y: y[-1], x)
            )  # fmt: skip
            for i, x in enumerate(outs)
        )
        return carry, saved

    return segment


def summarised_scan(step, carry, first, count, rows: int, save_every: int = 1,
                    summaries=None):  # fmt: skip
    """:func:`strided_scan` over the steps ``first``, ``first + 1``, ... whose number of
    saved rows ``count`` is an input of the program, at most ``rows`` (static;
    :func:`~jaxmbd.compiled.counted_scan.counted_scan`): one compiled program serves every
    horizon up to ``rows`` rows at the cost of the steps asked. Returns the carry and
    ``rows`` rows of outputs, those from ``count`` on zero. Forward mode only: the runs of
    concrete inputs outside any transformation."""
    if save_every == 1:
        return counted_scan(step, carry, first, count, rows)
    segment = _summarised(step, summaries)

    def row(carry, k):
        return segment(carry, k + jnp.arange(save_every, dtype=k.dtype))

    return counted_scan(row, carry, first, count, rows, stride=save_every)


def run_in_chunks(initial, chunk, n: int, chunk_size: int, progress, *, save_every: int = 1):
    """Run ``chunk`` repeatedly with one fixed size (one compilation), reporting progress.
    ``initial()`` returns the carry and the outputs of the first row, or None for them
    where the chunks give every row; ``chunk(carry, k0, size)`` runs ``size`` steps and
    returns size / save_every rows.

    The last chunk may run past step n; its extra steps are dropped. The rows are gathered
    on the host (numpy: no eager op per output and chunk), then put on the device once.
    """
    carry, first = initial()
    pieces = [] if first is None else [jax.tree_util.tree_map(lambda x: np.asarray(x)[None], first)]
    size = max(1, min(chunk_size, n))
    size = max(save_every, size - size % save_every)
    done = 0
    while done < n:
        carry, out = chunk(carry, np.asarray(done), size)
        keep = min(size, n - done)
        rows = keep // save_every
        pieces.append(jax.tree_util.tree_map(lambda x, rows=rows: np.asarray(x)[:rows], out))
        done += keep
        progress(done, n)
    return jax.tree_util.tree_map(lambda *xs: jax.device_put(np.concatenate(xs, axis=0)), *pieces)


def block_steps(size: int, save_every: int = 1) -> int:
    """``size`` rounded up to a multiple of ``save_every`` (a block's saved rows are whole)."""
    return -(-max(1, size) // save_every) * save_every


def run_in_blocks(head, block, n: int, size: int, progress=None, *, save_every: int = 1):
    """n steps as blocks of at most ``size`` steps, each a call of a program compiled once
    for every n, whose number of steps is an input (:func:`summarised_scan`): ``head(steps)``
    returns the carry and the outputs of t = 0 and of the first ``steps`` steps,
    ``block(carry, k0, steps)`` those of ``steps`` steps from step k0 (``size`` /
    save_every rows each, those past ``steps`` / save_every unused). No step past n is
    taken. The rows are gathered on the host and concatenated there (numpy: no program
    per horizon), then put on the device once."""

    def rows_of(out, keep, extra=0):
        rows = keep // save_every + extra
        return jax.tree_util.tree_map(lambda x: np.asarray(x)[:rows], out)

    done = min(size, n)
    carry, out = head(done)
    pieces = [rows_of(out, done, extra=1)]
    if progress is not None:
        progress(done, n)
    while done < n:
        keep = min(size, n - done)
        carry, out = block(carry, np.asarray(done), keep)
        pieces.append(rows_of(out, keep))
        done += keep
        if progress is not None:
            progress(done, n)
    return jax.tree_util.tree_map(lambda *xs: jax.device_put(np.concatenate(xs, axis=0)), *pieces)


def check_euler_angle_start(model: Model, form):
    """Refuse a start that the formulation's orientation chart cannot represent (a chart
    with singularities, e.g. re's ZXZ angles at theta = 0 or pi), naming the body."""
    if not form.has_chart_singularity or is_traced(model):
        return
    problems = form.start_chart_problems(model.A0)
    if problems:
        b, why = next(iter(problems.items()))
        raise ModelError(f"model '{model.name}', body '{model.body_names[b]}': {why}")
