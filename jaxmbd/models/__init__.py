"""Built-in mechanisms: the four benchmark mechanisms of Kissel, Taves and Negrut (section
4.2), a spinning top (a 3-D test of the integrators), the examples of Mueller & Terze, Betsch &
Leyendecker and Dumitriu & Margaritescu, and generated mechanisms of any size.

:data:`REGISTRY` holds each one's metadata once (builder, paper, default formulation, a
one-line description); :data:`BUILTIN` and the command line are derived from it. The
shipped models load a JSON file of jaxmbd's own schema from ``jaxmbd/models/data``
(:data:`SHIPPED`); masses and inertias are those of PAPER_NOTES. Driven mechanisms use the
regular rotation driver in place of the published DP1 driver (same motion, regular at every
angle).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType

from ..io import load_model
from ..model import Model

#: Built-in models shipped as JSON files in ``data/`` (Mueller & Terze's are written by
#: :func:`jaxmbd.models.mueller_terze.write_data`).
SHIPPED = ("single_pendulum", "double_pendulum", "four_link", "slider_crank", "spinning_top")
SHIPPED += ("heavy_top", "spherical_double_pendulum", "floating_pair", "spherical_three_bar")


def path(name: str):
    """Path of a built-in model file."""
    if name not in SHIPPED:
        raise ValueError(f"{name!r} is not a shipped model file; choose one of {list(SHIPPED)}")
    return resources.files(__package__) / "data" / f"{name}.json"


@cache
def _load_file(name: str) -> Model:
    return load_model(path(name))


def load(name: str, size: int | None = None) -> Model:
    """A built-in model by name (cached; models are immutable pytrees). A generated model
    is built with ``size`` (its :attr:`Builtin.size_argument`, default
    :attr:`Builtin.default_size`); the others take no size."""
    entry = builtin(name)
    if entry.size_argument is None:
        if size is not None:
            raise ValueError(f"built-in model {name!r} takes no size (given {size})")
        return _load_file(name) if name in SHIPPED else _build(name, None)
    size = entry.default_size if size is None else size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(
            f"{entry.size_argument} of built-in model {name!r} must be a positive integer, "
            f"got {size!r}"
        )
    return _build(name, size)


@cache
def _build(name: str, size: int | None) -> Model:
    entry = REGISTRY[name]
    return entry.build() if size is None else entry.build(**{entry.size_argument: size})


def single_pendulum() -> Model:
    """Driven single pendulum: 1 body, revolute to ground, angle pi/2 + (pi/4) cos 2t."""
    return load("single_pendulum")


def double_pendulum() -> Model:
    """Double pendulum: 2 bodies, 2 revolute joints, 2 degrees of freedom, no driver."""
    return load("double_pendulum")


def four_link() -> Model:
    """Spatial four-bar of Haug (rotor, link 2, link 3), rotor driven at pi rad/s."""
    return load("four_link")


def slider_crank() -> Model:
    """Spatial slider crank of Haug (crank, rod, slider), crank driven at 2 pi rad/s."""
    return load("slider_crank")


def spinning_top() -> Model:
    """An asymmetric heavy top on a ball joint at the origin under gravity: principal moments
    (0.05, 0.08, 0.11) kg m^2 about the centre of mass, m = 2 kg, centre of mass at
    c = (0.1, 0.05, 0.2) m from the pivot in body axes (off every principal axis), initial
    orientation exp((0.3, -0.5, 0.7)~), body angular velocity (3, -2, 10) rad/s. A
    non-planar 3-D motion with an independent reference (Euler's equations about the pivot)."""
    return load("spinning_top")


def heavy_top() -> Model:
    """Mueller-Terze 5.1: torque-free box (21.6 kg) on a spherical joint, centre of mass
    0.5 m from the pivot, omega0 = (0, 20 pi, 10 pi) rad/s, no gravity (see
    :func:`jaxmbd.models.mueller_terze.build_heavy_top`)."""
    return load("heavy_top")


def spherical_double_pendulum() -> Model:
    """Mueller-Terze 5.2: two 0.2 m aluminium links on spherical joints (joint1 to the
    ground, joint2 between them) under gravity (see ``mueller_terze``)."""
    return load("spherical_double_pendulum")


def floating_pair() -> Model:
    """Mueller-Terze 5.3: the two links of 5.2 joined by one spherical joint (joint2),
    floating without gravity (see ``mueller_terze``)."""
    return load("floating_pair")


def spherical_three_bar() -> Model:
    """Mueller-Terze 5.4: closed spherical 3-bar loop (joint1 and joint3 to the ground,
    joint2 between the links) with the notes' reconstructed geometry (see
    ``mueller_terze``)."""
    return load("spherical_three_bar")


# Betsch & Leyendecker (2006): built in code, data and assumptions in
# jaxmbd.models.betsch_leyendecker
from .betsch_leyendecker import (  # noqa: E402, F401
    cylindrical_pair,
    gyro_top,
    planar_pair,
    six_body_linkage,
)

# Dumitriu & Margaritescu: built in code, data and the eq. 27 angles in
# jaxmbd.models.dumitriu_margaritescu
from .dumitriu_margaritescu import bar_double_pendulum  # noqa: E402, F401

# Generated mechanisms of any size (scaling studies): chain, engine, binary tree
from .generated import binary_tree, engine, pendulum_chain  # noqa: E402, F401


@dataclasses.dataclass(frozen=True, kw_only=True)
class Builtin:
    """A built-in model's metadata: how it is built, where it comes from, how it runs.

    ``options`` are simulate options the model needs with its default formulation and that
    formulation's default integrator (the command line adds them there, under the user's
    own); ``size_argument`` names a generated model's size argument (``None`` otherwise).
    """

    name: str
    build: Callable[..., Model]
    paper: str
    formulation: str
    description: str
    size_argument: str | None = None
    default_size: int | None = None
    options: Mapping[str, object] = dataclasses.field(default_factory=lambda: MappingProxyType({}))


_KTN = "Kissel, Taves & Negrut"
_MT = "Mueller & Terze"
_BL = "Betsch & Leyendecker"
_DM = "Dumitriu & Margaritescu"

#: Every built-in model by name, in the order they are listed.
REGISTRY: dict[str, Builtin] = {
    e.name: e
    for e in (
        Builtin(name="single_pendulum", build=single_pendulum, paper=_KTN, formulation="rA",
                description="driven pendulum on a revolute joint (0 DOF, kinematics)"),
        Builtin(name="double_pendulum", build=double_pendulum, paper=_KTN, formulation="rA",
                description="two rods on revolute joints, 2 DOF"),
        Builtin(name="four_link", build=four_link, paper=_KTN, formulation="rA",
                description="Haug's spatial four-bar, driven rotor (0 DOF)"),
        Builtin(name="slider_crank", build=slider_crank, paper=_KTN, formulation="rA",
                description="Haug's spatial slider crank, driven crank (0 DOF)"),
        Builtin(name="spinning_top", build=spinning_top, paper="jaxmbd test case",
                formulation="rA",
                description="asymmetric heavy top on a ball joint, non-planar 3-D motion"),
        Builtin(name="heavy_top", build=heavy_top, paper=_MT, formulation="se3",
                description="torque-free box on a spherical joint (section 5.1)"),
        Builtin(name="spherical_double_pendulum", build=spherical_double_pendulum, paper=_MT,
                formulation="se3",
                description="two links on spherical joints under gravity (section 5.2)"),
        Builtin(name="floating_pair", build=floating_pair, paper=_MT, formulation="se3",
                description="two links joined by a spherical joint, floating (section 5.3)"),
        Builtin(name="spherical_three_bar", build=spherical_three_bar, paper=_MT,
                formulation="se3",
                description="closed spherical three-bar loop (section 5.4)"),
        Builtin(name="gyro_top", build=gyro_top, paper=_BL, formulation="director",
                description="heavy cone in steady precession about a fixed pivot (section 5.1)"),
        Builtin(name="cylindrical_pair", build=cylindrical_pair, paper=_BL,
                formulation="director",
                description="two cylinders on a cylindrical pair, free flight (section 5.2)"),
        Builtin(name="planar_pair", build=planar_pair, paper=_BL, formulation="director",
                description="pyramid sliding on a plate (planar pair), free flight (section 5.3)"),
        # 30 joint rows of rank 29: one is dropped for the run (jaxmbd.constraints.redundancy)
        Builtin(name="six_body_linkage", build=six_body_linkage, paper=_BL,
                formulation="director",
                description="overconstrained Bricard-type 6R loop, 1 DOF (section 5.4.2)"),
        Builtin(name="bar_double_pendulum", build=bar_double_pendulum, paper=_DM,
                formulation="rotmat",
                description="two bars on spherical joints, planar swing (section 4)"),
        Builtin(name="pendulum_chain", build=pendulum_chain, paper="generated",
                formulation="rA", size_argument="n_links", default_size=4,
                description="N rods on spherical joints released from a helix"),
        Builtin(name="engine", build=engine, paper="generated", formulation="rA",
                size_argument="n_cylinders", default_size=4,
                description="inline N-cylinder engine: driven crankshaft, N rods, N pistons"),
        Builtin(name="binary_tree", build=binary_tree, paper="generated", formulation="rA",
                size_argument="n_bodies", default_size=7,
                description="N rods in a binary tree on spherical joints"),
    )
}  # fmt: skip

#: Names of every built-in model (:func:`load` takes each).
BUILTIN = tuple(REGISTRY)


def builtin(name: str) -> Builtin:
    """The metadata of a built-in model; an unknown name raises ``ValueError`` listing all."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown built-in model {name!r}; choose one of {list(REGISTRY)}"
        ) from None
