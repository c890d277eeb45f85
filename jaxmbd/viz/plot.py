"""Plots of a Solution (matplotlib, headless), and :func:`animate` (3-D animation: GIF, MP4,
interactive HTML; see :mod:`jaxmbd.viz.animation`)."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np

from ..solution import Solution
from .animation import animate

__all__ = ["Inline", "animate", "inline", "plot_solution"]

# the file types an Inline shows, by suffix: their MIME type
_MIME = {".gif": "image/gif", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


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


class Inline:
    """An image file (an animation's GIF, a plot's PNG) shown inline in a notebook.

    Its display offers both the image's own MIME type and an HTML ``<img>`` with the image as a
    data URI. Front ends show whichever they prefer; converters that know no ``image/gif``
    (nbconvert, so mkdocs-jupyter) render the HTML. ``IPython.display.Image`` alone labels
    GIF bytes ``image/png`` in IPython 8 and ``image/gif`` in IPython 9, which such converters
    drop, so the animation would vanish from the rendered docs."""

    def __init__(self, path, *, width: int | None = None):
        path = Path(path)
        if path.suffix.lower() not in _MIME:
            raise ValueError(
                f"{path}: cannot show a {path.suffix!r} file inline; "
                f"give one of {sorted(_MIME)} (an .html animation opens in a browser)"
            )
        self.path = path
        self.mime = _MIME[path.suffix.lower()]
        self.width = width

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = base64.b64encode(self.path.read_bytes()).decode("ascii")
        width = "" if self.width is None else f' width="{int(self.width)}"'
        html = f'<img src="data:{self.mime};base64,{data}"{width} alt="{self.path.name}"/>'
        return {self.mime: data, "text/html": html}

    def __repr__(self) -> str:
        return f"Inline({str(self.path)!r})"


def inline(path, *, width: int | None = None) -> Inline:
    """Show an image or animation file inline in a notebook: ``mbd.plot.inline(gif)`` as a
    cell's last expression (see :class:`Inline`)."""
    return Inline(path, width=width)
