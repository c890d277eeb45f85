"""Draw docs/assets/layers.png: jaxmbd's layers, bottom up (docs/design.md, section 3).

Run from anywhere: python docs/assets/make_layers.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

#: (layer, what it holds), bottom first
LAYERS = [
    ("Lie groups, rotations", "SO(3), SE(3), Euler parameters and angles, rigid-body blocks"),
    ("model types", "Model pytree, bodies, drivers, joints and joint coordinates, shapes"),
    ("constraints", "GCON kernels DP1 DP2 D CD, equations Φ G ν γ, redundancy"),
    ("forces and contact", "force elements, joint forces, actuators; narrow phase, contact law"),
    ("sensors", "sensor definitions and readings"),
    ("solvers", "linear: dense, small, Schur, structured; Newton, line search"),
    ("formulations", "rA  rp  re  se3  director  rotmat"),
    ("integrators", "gen_alpha, backward_euler, rkmk, rk, energy_momentum, moreau_jean"),
    ("analyses", "simulate, kinematics, batches, statics, linearize, modes"),
    ("io, solution, diagnostics", "JSON, MJCF, URDF; Solution; energy, reactions"),
    ("viz, command line", "animations, plots, the jaxmbd command"),
]
ROUND = "round,pad=0.02,rounding_size=0.08"
#: the builder: beside the stack, from just above sensors to just below io
BUILDER = (5, 8)  # first and last layer index it spans
COLOURS = [
    "#dbe9f6",
    "#c6dbef",
    "#9ecae1",
    "#a1d99b",
    "#c7e9c0",
    "#fdd0a2",
    "#fdae6b",
    "#fc9272",
    "#bcbddc",
    "#d9d9d9",
    "#f0f0f0",
]


def main(out: Path) -> None:
    height, gap, width = 0.62, 0.12, 9.6
    fig, ax = plt.subplots(figsize=(12.6, 8.4))
    for k, ((name, what), colour) in enumerate(zip(LAYERS, COLOURS, strict=True)):
        y = k * (height + gap)
        ax.add_patch(
            FancyBboxPatch(
                (0, y),
                width,
                height,
                boxstyle=ROUND,
                facecolor=colour,
                edgecolor="#555555",
                linewidth=1,
            )
        )
        ax.text(
            0.18, y + height / 2, name, va="center", ha="left", fontsize=12.5, fontweight="bold"
        )
        ax.text(3.45, y + height / 2, what, va="center", ha="left", fontsize=10)
    # the builder, beside the layers it sits between
    lo, hi = BUILDER
    y0 = lo * (height + gap)
    y1 = hi * (height + gap) + height
    bx = width + 0.5
    ax.add_patch(
        FancyBboxPatch(
            (bx, y0),
            2.2,
            y1 - y0,
            boxstyle=ROUND,
            facecolor="#fff7bc",
            edgecolor="#555555",
            linewidth=1,
        )
    )
    ax.text(
        bx + 1.1,
        (y0 + y1) / 2 + 0.2,
        "ModelBuilder",
        ha="center",
        va="bottom",
        fontsize=12.5,
        fontweight="bold",
    )
    ax.text(
        bx + 1.1,
        (y0 + y1) / 2,
        "records bodies, joints,\nforces, contacts,\nactuators, sensors;\nbuilds the Model",
        ha="center",
        va="top",
        fontsize=10,
    )
    ax.text(
        bx + 0.55,
        y0 - 0.55,
        "builds",
        ha="left",
        va="center",
        fontsize=10,
        color="#7a6a00",
        style="italic",
    )
    ax.text(
        bx + 1.25,
        y1 + 0.28,
        "used by the readers",
        ha="left",
        va="center",
        fontsize=10,
        color="#7a6a00",
        style="italic",
    )
    for target in (1, 2, 3, 4):  # the types it builds
        yt = target * (height + gap) + height / 2
        ax.add_patch(
            FancyArrowPatch(
                (bx + 0.3, y0),
                (width + 0.05, yt),
                arrowstyle="-|>",
                mutation_scale=12,
                color="#7a6a00",
                linewidth=1.0,
                connectionstyle="arc3,rad=-0.15",
            )
        )
    io = 9 * (height + gap)
    ax.add_patch(
        FancyArrowPatch(
            (width - 0.6, io),
            (bx + 1.1, y1),
            arrowstyle="-|>",
            mutation_scale=12,
            color="#7a6a00",
            linewidth=1.0,
            connectionstyle="arc3,rad=-0.3",
        )
    )
    # imports point down
    top = len(LAYERS) * (height + gap) - gap
    ax.add_patch(
        FancyArrowPatch(
            (-0.55, top),
            (-0.55, 0),
            arrowstyle="-|>",
            mutation_scale=18,
            color="#333333",
            linewidth=1.5,
        )
    )
    ax.text(-0.8, top / 2, "imports point down", rotation=90, ha="center", va="center", fontsize=11)
    ax.set_xlim(-1.2, bx + 2.5)
    ax.set_ylim(-0.2, top + 0.2)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "layers.png")
