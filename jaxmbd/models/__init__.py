"""Built-in mechanisms, as shipped files: the four benchmark mechanisms of Kissel, Taves and
Negrut (section 4.2) and a spinning top (a 3-D test of the integrators).

Each builder loads a JSON file of jaxmbd's own schema from ``jaxmbd/models/data``; masses and
inertias are those of PAPER_NOTES. Driven mechanisms use the regular rotation driver in place
of the published DP1 driver (same motion, regular at every angle).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from ..io import load_model
from ..model import Model

BUILTIN = ("single_pendulum", "double_pendulum", "four_link", "slider_crank", "spinning_top")
# Mueller & Terze (section 5): data and assumptions in jaxmbd.models.mueller_terze
BUILTIN += ("heavy_top", "spherical_double_pendulum", "floating_pair", "spherical_three_bar")


def path(name: str):
    """Path of a built-in model file."""
    if name not in BUILTIN:
        raise ValueError(f"unknown built-in model {name!r}; choose one of {list(BUILTIN)}")
    return resources.files(__package__) / "data" / f"{name}.json"


@cache
def _load(name: str) -> Model:
    return load_model(path(name))


def load(name: str) -> Model:
    """A built-in model by name (cached; models are immutable pytrees)."""
    return _load(name)


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
