"""Plots of a Solution (matplotlib, headless), and :func:`animate` (3-D animation: GIF, MP4,
interactive HTML; see :mod:`jaxmbd.animation`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .animation import animate
from .solution import Solution

__all__ = ["animate", "plot_solution"]


def plot_solution(sol: Solution, path, *, title: str | None = None) -> Path:
    """Positions, velocities and accelerations of every body, and Newton iterations per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(sol.t)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for (key, label), ax in zip(
        (("r", "position [m]"), ("rdot", "velocity [m/s]"), ("rddot", "acceleration [m/s²]")),
        axes.flat,
        strict=False,
    ):
        values = np.asarray(getattr(sol, key))
        for b, name in enumerate(sol.body_names):
            for k, axis in enumerate("xyz"):
                if np.ptp(values[:, b, k]) > 1e-12:
                    ax.plot(t, values[:, b, k], label=f"{name} {axis}")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=2)
    ax = axes[1, 1]
    ax.step(t, np.asarray(sol.iterations), where="post", color="k")
    ax.set_ylabel("Newton iterations")
    ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("t [s]")
    fig.suptitle(title or f"{sol.formulation} solution")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
