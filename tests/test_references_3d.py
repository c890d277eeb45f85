"""Independent 3-D references (numpy/scipy only in the reference code, no jaxmbd there).

1. A torque-free asymmetric rigid body: Euler's equations with quaternion kinematics,
   integrated by scipy DOP853 at rtol = atol = 1e-12 (``references.free_rigid_body``),
   against jaxmbd's gen_alpha in rA, rp and re; the global angular momentum A J w must be
   conserved to a tight tolerance.
2. The heavy top on a ball joint under gravity is already checked against an independent
   DOP853 quaternion reference: tests/test_integrators.py
   (``test_spinning_top_order_against_euler_equations``, gen_alpha in rA and rp, backward
   Euler in rA) and tests/test_mueller_terze.py (``test_heavy_top_order_and_dexp_sign``);
   it is not duplicated here.
3. The spatial four-link of Haug (p. 459; data in PAPER_NOTES): its loop closure
   |C(phi) - B(theta)| = L2 solved in closed form, velocities and accelerations by implicit
   differentiation, against ``mbd.kinematics`` in rA, rp and re.
"""

from functools import cache

import numpy as np
import pytest
import references
from tolerances import ROUND_OFF

import jaxmbd as mbd

FORMULATIONS = ("rA", "rp", "re")


def noop(done, total):
    pass


# ------------------------------------------------------------------ 1. torque-free body

INERTIA = np.diag([0.02, 0.05, 0.06])  # three distinct principal moments
OMEGA0 = np.array([1.0, 6.0, 0.5])  # close to the intermediate axis: it tumbles
ROT0 = np.array([0.4, -0.2, 0.3])  # generic initial orientation (rotation vector)
FREE_T_END, FREE_H = 1.0, 1e-3


def _rotvec_matrix(phi):
    """Rodrigues' formula (numpy), independent of jaxmbd's exponential map."""
    theta = np.linalg.norm(phi)
    k = references.skew(phi / theta)
    return np.eye(3) + np.sin(theta) * k + (1.0 - np.cos(theta)) * k @ k


def free_body_model():
    b = mbd.ModelBuilder("torque-free body", gravity=(0.0, 0.0, 0.0))
    b.add_body(
        "box",
        mass=1.5,
        inertia=INERTIA.tolist(),
        A=_rotvec_matrix(ROT0),
        rdot=[0.1, -0.2, 0.05],
        omega=OMEGA0.tolist(),
    )
    return b.build()


@cache
def free_body_errors(formulation):
    """Max errors over FREE_T_END of A and omega_bar against DOP853, the relative drift of
    the global angular momentum A J w and of the kinetic energy, and the largest error of
    the centre of mass (free flight at constant velocity)."""
    model = free_body_model()
    sol = mbd.simulate(
        model,
        formulation=formulation,
        integrator="gen_alpha",
        t_end=FREE_T_END,
        h=FREE_H,
        progress=noop,
    )
    t = np.asarray(sol.t)
    ref = references.free_rigid_body(t, inertia=INERTIA, A0=_rotvec_matrix(ROT0), omega0=OMEGA0)
    A, w = np.asarray(sol.A[:, 0]), np.asarray(sol.omega[:, 0])
    L = np.einsum("tij,jk,tk->ti", A, INERTIA, w)
    L0 = ref["angular_momentum"][0]
    e = 0.5 * np.einsum("ti,ij,tj->t", w, INERTIA, w)
    r_ref = np.asarray(model.r0[0]) + t[:, None] * np.array([0.1, -0.2, 0.05])
    return {
        "A": np.abs(A - ref["A"]).max(),
        "omega": np.abs(w - ref["omega_bar"]).max() / np.abs(OMEGA0).max(),
        "momentum": np.abs(L - L0).max() / np.linalg.norm(L0),
        "energy": np.abs(e - ref["energy"][0]).max() / ref["energy"][0],
        "r": np.abs(np.asarray(sol.r[:, 0]) - r_ref).max(),
        "ref_momentum": np.abs(ref["angular_momentum"] - L0).max() / np.linalg.norm(L0),
    }


def test_free_body_reference_is_tight():
    """The reference itself keeps its invariants to ~1e-11 (DOP853 at 1e-12), so it can
    judge jaxmbd at the 1e-6 level."""
    assert free_body_errors("rA")["ref_momentum"] < 4e-11


# measured at h = 1e-3 (python -m pytest tests/test_references_3d.py -s -k free_body):
# rA: A 2.3e-6, omega 1.1e-6, momentum 9.6e-7, energy 1.6e-6; rp: 4.9e-6, 2.6e-6, 6.5e-7,
# 1.2e-6; re (Euler angles, a far larger error constant): 2.0e-4, 1.8e-4, 8.6e-5, 1.6e-4.
FREE_BODY_BOUNDS = {"rA": 5e-6, "rp": 1e-5, "re": 4e-4}


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_free_body_against_euler_equations(formulation):
    """gen_alpha (second order, rho_inf = 0.9) at h = 1e-3 over 1 s of tumbling:
    orientation, body rates, global angular momentum and kinetic energy within
    FREE_BODY_BOUNDS of DOP853 (about 2x what is measured; the momentum must be kept to
    ~1e-6 relative in rA and rp, not 20 %), the centre of mass in uniform motion."""
    err = free_body_errors(formulation)
    print(formulation, {k: f"{v:.2e}" for k, v in err.items()})
    bound = FREE_BODY_BOUNDS[formulation]
    for key in ("A", "omega", "momentum", "energy"):
        assert err[key] < bound, (key, err)
    assert err["momentum"] < bound / 2, err
    assert err["r"] < ROUND_OFF, err


@pytest.mark.slow
@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_free_body_second_order(formulation):
    """Halving h divides the orientation and momentum errors by about 4 in every
    formulation (second order against the DOP853 reference)."""
    model = free_body_model()
    rows = []
    for h in (2e-3, 1e-3, 5e-4):
        sol = mbd.simulate(model, formulation=formulation, t_end=1.0, h=h, progress=noop)
        t = np.asarray(sol.t)
        ref = references.free_rigid_body(t, inertia=INERTIA, A0=_rotvec_matrix(ROT0),
                                         omega0=OMEGA0)  # fmt: skip
        A, w = np.asarray(sol.A[:, 0]), np.asarray(sol.omega[:, 0])
        L = np.einsum("tij,jk,tk->ti", A, INERTIA, w)
        rows.append([np.abs(A - ref["A"]).max(), np.abs(L - ref["angular_momentum"]).max()])
    rows = np.array(rows)
    orders = np.log2(rows[:-1] / rows[1:])
    print(formulation, rows, orders)
    assert np.all(np.abs(orders - 2) < 0.3), (rows, orders)


# ------------------------------------------------------------------ 3. four-link kinematics

# Haug (1989) p. 459, PAPER_NOTES section 1: rotor of radius R about global x at the origin,
# driven at OMEGA rad/s from THETA0; link 3 of length L3 pivoting about global y at D;
# link 2 of length L2 from the rotor tip B (universal joint) to link 3's tip C (spherical).
R, L2, L3 = 2.0, 12.2, 7.4
D = np.array([-4.0, -8.5, 0.0])
OMEGA, THETA0 = np.pi, np.pi / 2
E_Y = np.array([0.0, 1.0, 0.0])


def four_link_reference(t):
    """Closed-form loop closure. With B = (0, R cos th, R sin th) and
    C = D + L3 (cos phi, 0, sin phi), |C - B|^2 = L2^2 reads a cos phi + b sin phi = k
    (Freudenstein form), solved by atan2/arccos on the branch with C above the x-y plane;
    phi' and phi'' follow from differentiating u.u = L2^2, u = C - B."""
    t = np.asarray(t, dtype=float)
    th = THETA0 + OMEGA * t
    zero = np.zeros_like(t)
    B = np.stack([zero, R * np.cos(th), R * np.sin(th)], -1)
    Bd = OMEGA * np.stack([zero, -R * np.sin(th), R * np.cos(th)], -1)
    Bdd = -(OMEGA**2) * B
    d = D - B
    a, b = L3 * d[:, 0], L3 * d[:, 2]
    k = 0.5 * (L2**2 - L3**2 - np.sum(d * d, axis=1))
    base, half = np.arctan2(b, a), np.arccos(k / np.hypot(a, b))
    branches = np.stack([base + half, base - half])
    phi = np.where(np.sin(branches[0]) > 0, branches[0], branches[1])
    cd = L3 * np.stack([np.cos(phi), zero, np.sin(phi)], -1)  # C - D
    C = D + cd
    e_phi = L3 * np.stack([-np.sin(phi), zero, np.cos(phi)], -1)  # dC/dphi
    u = C - B
    phid = np.sum(u * Bd, 1) / np.sum(u * e_phi, 1)
    ud = phid[:, None] * e_phi - Bd
    phidd = (-np.sum(ud * ud, 1) + phid**2 * np.sum(u * cd, 1) + np.sum(u * Bdd, 1)) / np.sum(
        u * e_phi, 1
    )
    Cd = phid[:, None] * e_phi
    Cdd = phidd[:, None] * e_phi - (phid**2)[:, None] * cd
    ud, udd = Cd - Bd, Cdd - Bdd
    n = u / L2
    return {
        "r": np.stack([np.zeros_like(B), 0.5 * (B + C), D + 0.5 * cd], 1),
        "rdot": np.stack([np.zeros_like(B), 0.5 * (Bd + Cd), 0.5 * Cd], 1),
        "rddot": np.stack([np.zeros_like(B), 0.5 * (Bdd + Cdd), 0.5 * Cdd], 1),
        # global angular velocities: rotor about +x, link 3 about -y (phi grows from x to z)
        "omega_rotor": np.tile([OMEGA, 0.0, 0.0], (len(t), 1)),
        "omega_link3": -phid[:, None] * E_Y,
        "omegadot_link3": -phidd[:, None] * E_Y,
        # link 2: the part of its angular velocity normal to its axis is n x n'
        "omega_link2_normal": np.cross(n, ud / L2),
        "axis_link2": n,
        "udd": udd,
    }


@cache
def four_link_errors(formulation):
    model = mbd.models.four_link()
    kin = mbd.kinematics(model, formulation=formulation, t_end=2.0, h=1e-2, progress=noop)
    ref = four_link_reference(np.asarray(kin.t))
    A = np.asarray(kin.A)
    w = np.einsum("tbij,tbj->tbi", A, np.asarray(kin.omega))  # global
    wd = np.einsum("tbij,tbj->tbi", A, np.asarray(kin.omegadot))  # global (A wbar_dot)
    n = ref["axis_link2"]
    w2n = w[:, 1] - np.sum(w[:, 1] * n, 1)[:, None] * n
    return {
        "r": np.abs(np.asarray(kin.r) - ref["r"]).max(),
        "rdot": np.abs(np.asarray(kin.rdot) - ref["rdot"]).max(),
        "rddot": np.abs(np.asarray(kin.rddot) - ref["rddot"]).max(),
        "omega": max(
            np.abs(w[:, 0] - ref["omega_rotor"]).max(),
            np.abs(w[:, 2] - ref["omega_link3"]).max(),
            np.abs(w2n - ref["omega_link2_normal"]).max(),
        ),
        "omegadot": max(np.abs(wd[:, 0]).max(), np.abs(wd[:, 2] - ref["omegadot_link3"]).max()),
        "scale": {
            "rdot": np.abs(ref["rdot"]).max(),
            "rddot": np.abs(ref["rddot"]).max(),
            "omegadot": np.abs(ref["omegadot_link3"]).max(),
        },
    }


def test_four_link_reference_closes_the_loop():
    """The reference itself: |C - B| = L2 and |C - D| = L3 at every time, and its
    velocities agree with central differences of its positions."""
    t = np.linspace(0.0, 2.0, 201)
    ref = four_link_reference(t)
    C = 2 * ref["r"][:, 2] - D
    B = 2 * ref["r"][:, 1] - C
    np.testing.assert_allclose(np.linalg.norm(C - D, axis=1), L3, rtol=ROUND_OFF)
    np.testing.assert_allclose(np.linalg.norm(C - B, axis=1), L2, rtol=ROUND_OFF)
    np.testing.assert_allclose(np.linalg.norm(B, axis=1), R, rtol=ROUND_OFF)
    assert np.all(C[:, 2] > 0)
    eps = 1e-6
    plus, minus = four_link_reference(t + eps), four_link_reference(t - eps)
    fd = (plus["r"] - minus["r"]) / (2 * eps)
    np.testing.assert_allclose(fd, ref["rdot"], rtol=0, atol=1e-8)
    fd = (plus["rdot"] - minus["rdot"]) / (2 * eps)
    np.testing.assert_allclose(fd, ref["rddot"], rtol=0, atol=4e-8)


@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow), "re"])
def test_four_link_kinematics_against_closed_form(formulation):
    """Positions, velocities, accelerations and angular rates of the spatial four-link over
    one rotor turn (2 s) against the closed-form loop closure, to 2e-9 (positions in
    units of the 12.2 link, rates relative to their scale)."""
    err = four_link_errors(formulation)
    print(formulation, {k: v for k, v in err.items()})
    assert err["r"] < 2e-9, err
    assert err["rdot"] < 4e-10 * err["scale"]["rdot"], err
    assert err["rddot"] < 4e-10 * err["scale"]["rddot"], err
    assert err["omega"] < 2e-9, err
    assert err["omegadot"] < 2e-10 * err["scale"]["omegadot"], err
