"""jaxmbd against other engines: one study, four comparisons, one entry point.

    python -m benchmarks.engines classic ...    # Exudyn and MuJoCo C, the built-in models
    python -m benchmarks.engines jax-peers ...  # MJX and jaxsim on the same MJCF files
    python -m benchmarks.engines control ...    # MJX on control models under controls
    python -m benchmarks.engines joint-coordinates ...  # the joint formulation, MJX, MuJoCo C

This module holds the geometry, masses and inertias of jaxmbd's built-in ``slider_crank``,
``double_pendulum`` and ``heavy_top`` that ``in_exudyn.py`` and ``in_mujoco.py`` build in
the other engines. Both engines are optional (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

BENCH_HINT = "this benchmark needs Exudyn and MuJoCo: pip install -e '.[bench]'"

# ---- slider crank (jaxmbd/models/data/slider_crank.json) -------------------------------
CRANK_PIVOT = np.array([0.0, 0.1, 0.12])
CRANK_A = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
CRANK_MASS, CRANK_J = 0.12, (1e-4, 1e-5, 1e-4)
CRANK_PIN_LOCAL = np.array([0.0, 0.08, 0.0])  # crank pin B in the crank frame
CRANK_SPEED = 2.0 * np.pi  # rad/s about -x
ROD_R = np.array([0.1, 0.05, 0.1])
_rod_x = np.array([2.0, -1.0, -2.0]) / 3.0
_rod_y = np.array([0.0, 2.0, -1.0]) / np.sqrt(5.0)
ROD_A = np.stack([_rod_x, _rod_y, np.cross(_rod_x, _rod_y)], axis=1)
ROD_MASS, ROD_J = 0.5, (4e-3, 4e-4, 4e-3)
ROD_B_LOCAL = np.array([-0.15, 0.0, 0.0])  # spherical joint with the crank
ROD_C_LOCAL = np.array([0.15, 0.0, 0.0])  # joint with the slider (= slider CM)
SLIDER_R = np.array([0.2, 0.0, 0.0])
SLIDER_A = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
SLIDER_MASS, SLIDER_J = 2.0, (1e-4, 1e-4, 1e-4)

# ---- double pendulum (jaxmbd/models/data/double_pendulum.json) -------------------------
ROD1_R = np.array([0.0, 2.0, 0.0])
ROD1_A = np.stack([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], axis=1)
ROD1_MASS, ROD1_J, ROD1_HALF = 78.0, (0.0325, 104.01625, 104.01625), 2.0
ROD2_R = np.array([0.0, 4.0, -1.0])
ROD2_A = np.stack([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], axis=1)
ROD2_MASS, ROD2_J, ROD2_HALF = 39.0, (0.01625, 13.008125, 13.008125), 1.0
GRAVITY = np.array([0.0, 0.0, -9.81])


# ---- heavy top (jaxmbd.models.spinning_top) ----------------------------------------------
class TopData(NamedTuple):
    """One rigid body on a ball joint to the ground under uniform gravity."""

    mass: float
    inertia: np.ndarray  # 3x3, about the centre of mass, body axes
    com: np.ndarray  # centre of mass from the pivot, body axes
    A0: np.ndarray  # initial rotation matrix (body to global)
    omega0: np.ndarray  # initial angular velocity, BODY frame (jaxmbd's omega0)
    gravity: np.ndarray
    pivot: np.ndarray


def top_data(model) -> TopData:
    """TopData of a one-body jaxmbd model whose body hangs on a ball joint at the origin
    (``heavy_top``, ``spinning_top``); the centre of mass from the pivot is A0^T r0."""
    A0 = np.asarray(model.A0[0], dtype=float)
    return TopData(
        mass=float(model.mass[0]),
        inertia=np.asarray(model.inertia[0], dtype=float),
        com=A0.T @ np.asarray(model.r0[0], dtype=float),
        A0=A0,
        omega0=np.asarray(model.omega0[0], dtype=float),
        gravity=np.asarray(model.gravity, dtype=float),
        pivot=np.zeros(3),
    )


def _heavy_top() -> TopData:
    """jaxmbd's ``spinning_top``: an asymmetric 2 kg body, J = diag(0.05, 0.08, 0.11) kg m^2
    about its centre of mass, on a ball joint at the origin under gravity, tilted A0 and
    spinning (a heavy top; jaxmbd's ``heavy_top`` model is Mueller & Terze's torque-free
    box, without gravity)."""
    import jaxmbd as mbd

    return top_data(mbd.models.spinning_top())


HEAVY_TOP = _heavy_top()


def check_top_data(model, data: TopData = HEAVY_TOP) -> None:
    """Raise if ``data`` differs from the jaxmbd model's (the engines use ``data``)."""
    for field, value in top_data(model)._asdict().items():
        if not np.allclose(value, getattr(data, field), rtol=1e-12, atol=1e-14):
            raise ValueError(f"heavy top {field}: model {value} != engines {getattr(data, field)}")
    # the engines derive the centre-of-mass velocity from the pivot at rest: A0 (w x c)
    if not np.allclose(model.rdot0[0], data.A0 @ np.cross(data.omega0, data.com), atol=1e-12):
        raise ValueError("heavy top: the model's initial velocity moves the pivot")


for _a in (CRANK_A, ROD_A, SLIDER_A, ROD1_A, ROD2_A):
    assert np.allclose(_a.T @ _a, np.eye(3)) and np.isclose(np.linalg.det(_a), 1.0)


def slider_crank_initial_velocities() -> tuple[np.ndarray, np.ndarray]:
    """CM velocities and global angular velocities (3 bodies x 3) of the driven slider crank
    at t = 0. The mechanism has no free degree of freedom, so these are the unique velocities
    consistent with the joints and the drive (jaxmbd computes the same by projection)."""
    crank_w = np.array([-CRANK_SPEED, 0.0, 0.0])
    pin = CRANK_A @ CRANK_PIN_LOCAL  # from the pivot
    v_pin = np.cross(crank_w, pin)
    point_b = CRANK_PIVOT + pin
    point_c = ROD_R + ROD_A @ ROD_C_LOCAL
    # slider: C = (x, 0, 0), |C - B| = L  =>  (C - B) . (xdot e_x - v_B) = 0
    d = point_c - point_b
    x_dot = d @ v_pin / d[0]
    v_c = np.array([x_dot, 0.0, 0.0])
    # rod: v_C - v_B = w x d with w . e_y_rod-constraint; w = a e_x + b y_rod (universal pair)
    rod_y = ROD_A[:, 1]
    basis = np.stack([np.cross(np.array([1.0, 0.0, 0.0]), d), np.cross(rod_y, d)], axis=1)
    coef, *_ = np.linalg.lstsq(basis, v_c - v_pin, rcond=None)
    rod_w = coef[0] * np.array([1.0, 0.0, 0.0]) + coef[1] * rod_y
    assert np.allclose(basis @ coef, v_c - v_pin)
    velocities = np.stack([np.zeros(3), 0.5 * (v_pin + v_c), v_c])
    return velocities, np.stack([crank_w, rod_w, np.zeros(3)])


def mjx_compatible_model(path, integrator: str = "RK4", h: float = 1e-3, *, limits=False):
    """A MuJoCo model of the MJCF file ``path`` set up as MJX can run and differentiate it:
    ``integrator`` (Euler, implicitfast, RK4) at step ``h``, ``opt.enableflags = 0`` (MJX
    does not implement the energy flag; the energy is unused), contacts off, and joint
    limits off unless ``limits`` (with them MJX's constraint solver is a while loop that
    reverse mode cannot differentiate)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator}")
    m.opt.timestep = h
    m.opt.enableflags = 0
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if not limits:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    return m


def progress(message: str) -> None:
    """A progress line on stdout with the wall-clock time (the long comparisons' log)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
