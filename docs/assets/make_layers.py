"""Draw docs/assets/layers.png: jaxmbd's layers, bottom up (docs/design.md, section 3).

Run from anywhere: python docs/assets/make_layers.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

#: (layer, what it holds, colour), bottom first
LAYERS = [
    (
        "_config, errors, compiled/",
        "float64, program cache, XLA flags, batch lanes, small kernels",
        "#f0f0f0",
    ),
    (
        "lie/, gcons",
        "SO(3), SE(3), Euler parameters, angles; GCONs DP1 DP2 D CD",
        "#dbe9f6",
    ),
    (
        "geometry/, tree/, model/",
        "shapes; kinematic trees; the Model pytree, joints, drivers, markers",
        "#c6dbef",
    ),
    ("linear/, newton/", "dense, small, Schur, structured; Newton, line search", "#fdd0a2"),
    (
        "constraints/, soft_constraints/",
        "Φ G ν γ, redundancy; MuJoCo's soft rows and their solve",
        "#9ecae1",
    ),
    (
        "forces/ tendons/ contact/ sensors/ actuators/",
        "force elements, tendons, contact, sensors, actuators",
        "#a1d99b",
    ),
    ("build/", "ModelBuilder: one module per part", "#fff7bc"),
    (
        "formulations/, integrators/",
        "rA rp re se3 director rotmat; gen_alpha rkmk rk ...",
        "#fdae6b",
    ),
    (
        "solution, checks, joint_space/",
        "Solution; statuses; the joint formulation and its steps",
        "#fc9272",
    ),
    (
        "analysis/",
        "simulate, kinematics, batches, statics, linearize, modes, diagnostics",
        "#bcbddc",
    ),
    ("mjcf/, io/", "MJCF, URDF, JSON, published files, controls files", "#d9d9d9"),
    ("models/, envs/", "the papers' mechanisms, generated families; environments", "#e5e5e5"),
    ("viz/, cli", "animations, plots, the jaxmbd command", "#f0f0f0"),
]
ROUND = "round,pad=0.02,rounding_size=0.08"
BROWN = "#7a6a00"


def main(out: Path) -> None:
    height, gap, width = 0.56, 0.1, 10.0
    step = height + gap
    fig, ax = plt.subplots(figsize=(12.6, 8.6))
    for k, (name, what, colour) in enumerate(LAYERS):
        y = k * step
        bold = name == "build/"
        ax.add_patch(
            FancyBboxPatch(
                (0, y), width, height, boxstyle=ROUND, facecolor=colour,
                edgecolor=BROWN if bold else "#555555", linewidth=2.0 if bold else 1.0,
            )
        )  # fmt: skip
        ax.text(0.18, y + height / 2, name, va="center", ha="left", fontsize=10.5,
                fontweight="bold")  # fmt: skip
        ax.text(4.6, y + height / 2, what, va="center", ha="left", fontsize=10)
    # the builder builds the types and the elements below it
    builder = [n for n, _, _ in LAYERS].index("build/")
    for target in (
        "geometry/, tree/, model/",
        "forces/ tendons/ contact/ sensors/ actuators/",
        "constraints/, soft_constraints/",
    ):
        k = [n for n, _, _ in LAYERS].index(target)
        ax.add_patch(
            FancyArrowPatch(
                (width + 0.05, builder * step + height / 2), (width + 0.05, k * step + height / 2),
                arrowstyle="-|>", mutation_scale=12, color=BROWN, linewidth=1.0,
                connectionstyle=f"arc3,rad=-{0.25 + 0.1 * (builder - k)}",
            )
        )  # fmt: skip
    ax.text(width + 1.2, (builder - 2) * step, "builds", ha="left", va="center", fontsize=10.5,
            color=BROWN, style="italic")  # fmt: skip
    # imports point down
    top = len(LAYERS) * step - gap
    ax.add_patch(FancyArrowPatch((-0.55, top), (-0.55, 0), arrowstyle="-|>", mutation_scale=18,
                                 color="#333333", linewidth=1.5))  # fmt: skip
    ax.text(-0.8, top / 2, "imports point down", rotation=90, ha="center", va="center",
            fontsize=11)  # fmt: skip
    ax.set_xlim(-1.2, width + 2.2)
    ax.set_ylim(-0.2, top + 0.2)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "layers.png")
