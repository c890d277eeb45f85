"""Connector outputs (issue 74 item 3): ``sol.forces[name]`` reports each named force
element's force, length (or deflection) and rate per step, in every formulation, against a
hand computation from the stored body states: a spring-damper's tension k (l - l0) + c
l_dot along its line, and a bushing's deflection (C_i^T (p_j - p_i), the rotation vector of
C_i^T C_j; scipy), its rate (the inverse right Jacobian of SO(3) in closed form) and
wrench -(K s + C s_dot)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxmbd as mbd

K6 = np.array([100.0, 200.0, 300.0, 10.0, 20.0, 30.0])
C6 = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
ANCHOR = np.array([0.0, 0.0, 1.0])  # the spring's ground point
S_BAR = np.array([0.1, 0.0, 0.0])  # its point on the block (body frame)
# the block's initial orientation (body z horizontal: "re"'s Euler angles are regular there)
A0 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
#: Every formulation; those other than the default compile their own programs (slow).
FORMULATIONS = ["joint", "rA"] + [
    pytest.param(f, marks=pytest.mark.slow) for f in ("rp", "re", "se3", "director", "rotmat")
]


def connected_block() -> mbd.Model:
    """A free block held by a bushing to the ground at its centre and by a spring-damper
    from ANCHOR to S_BAR, no gravity, launched in the plane with a spin about its z axis
    (its principal moments not those of a flat plate, whose K = tr(J)/2 - J "rotmat"
    cannot invert)."""
    b = mbd.ModelBuilder("connected block", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=1.0, inertia=[0.01, 0.02, 0.025], r=(0.0, 0.0, 0.0), A=A0,
               rdot=(0.3, -0.2, 0.0), omega=(0.0, 0.0, 2.0))  # fmt: skip
    b.bushing("mount", "ground", "block", (0.0, 0.0, 0.0), stiffness=K6.tolist(),
              damping=C6.tolist())  # fmt: skip
    b.spring_damper("strut", body_i="ground", point_i=ANCHOR, body_j="block", point_j=S_BAR,
                    stiffness=50.0, damping=0.5, rest_length=0.8)  # fmt: skip
    return b.build()


@pytest.fixture(scope="module")
def block():
    return connected_block()


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_spring_damper_and_bushing_outputs_equal_the_hand_computation(block, formulation):
    sol = mbd.simulate(block, formulation=formulation, t_end=0.1, h=1e-3)
    assert sol.formulation == formulation and set(sol.forces) == {"mount", "strut"}
    r, A = np.asarray(sol.r)[:, 0], np.asarray(sol.A)[:, 0]
    rdot, omega = np.asarray(sol.rdot)[:, 0], np.asarray(sol.omega)[:, 0]
    # spring-damper: P on the ground, Q = r + A s_bar moving at rdot + A (omega x s_bar)
    d = r + A @ S_BAR - ANCHOR
    length = np.linalg.norm(d, axis=1)
    velocity = rdot + np.einsum("tij,tj->ti", A, np.cross(omega, S_BAR))
    rate = np.einsum("ti,ti->t", d / length[:, None], velocity)
    strut = sol.forces["strut"]
    np.testing.assert_allclose(np.asarray(strut.length), length, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(strut.rate), rate, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(strut.force), 50.0 * (length - 0.8) + 0.5 * rate,
                               rtol=1e-10)  # fmt: skip
    assert np.ptp(length) > 0.01  # it moved
    # bushing on the ground's frame at the origin, global axes, the block's frame aligned
    # with them at the start: s = (r, rotvec(A A0^T))
    mount = sol.forces["mount"]
    s = np.concatenate([r, Rotation.from_matrix(A @ A0.T).as_rotvec()], 1)
    np.testing.assert_allclose(np.asarray(mount.length), s, atol=1e-12)
    # the rates: d = r gives r_dot; theta = log(A A0^T), whose (A A0^T)^T d/dt(A A0^T) is
    # (A0 omega_bar)~, gives J_r^-1(theta) A0 omega_bar with the
    # inverse right Jacobian of SO(3) in closed form (J. Sola et al., "A micro Lie theory",
    # 2018, eq. 144): I + theta~ / 2 + (1 / t^2 - (1 + cos t) / (2 t sin t)) theta~^2
    theta = s[:, 3:]
    t = np.linalg.norm(theta, axis=1)[:, None, None]
    hat = np.zeros((len(theta), 3, 3))
    hat[:, 0, 1], hat[:, 0, 2], hat[:, 1, 2] = -theta[:, 2], theta[:, 1], -theta[:, 0]
    hat = hat - np.swapaxes(hat, 1, 2)
    safe = np.where(t > 1e-6, t, 1.0)  # the coefficient's limit at 0 is 1/12
    coef = np.where(t > 1e-6, 1 / safe**2 - (1 + np.cos(safe)) / (2 * safe * np.sin(safe)), 1 / 12)
    jr_inv = np.eye(3) + hat / 2 + coef * hat @ hat
    s_dot = np.concatenate([rdot, np.einsum("tij,tj->ti", jr_inv, omega @ A0.T)], 1)
    np.testing.assert_allclose(np.asarray(mount.rate), s_dot, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(mount.force), -(K6 * s + C6 * s_dot), atol=1e-10)
    assert np.ptp(np.linalg.norm(s[:, 3:], axis=1)) > 0.03  # it turned


def test_force_names_are_unique_and_required():
    b = mbd.ModelBuilder("twice")
    b.add_body("a", mass=1.0, inertia=[1.0] * 3)
    b.bushing("mount", "ground", "a", (0, 0, 0), stiffness=K6.tolist())
    with pytest.raises(mbd.ModelError, match="'mount': duplicate force name"):
        b.spring_damper("mount", body_i="ground", point_i=(0, 0, 1), body_j="a",
                        point_j=(0, 0, 0), stiffness=1.0, rest_length=1.0)  # fmt: skip


def test_spring_names_survive_model_files(block, tmp_path):
    path = tmp_path / "block.json"
    mbd.save_model(block, path)
    sol = mbd.simulate(mbd.load_model(path), t_end=0.002, h=1e-3)
    assert set(sol.forces) == {"mount", "strut"}
