"""Every public analysis with every formulation name either runs in that formulation or
raises a ValueError that names what the formulation lacks and the formulations to use
instead: ``simulate``, ``kinematics``, ``static_equilibrium``, ``linearize``, ``modes``,
``simulate_batch`` and ``reaction_forces`` on a pendulum (driven for ``kinematics``), each
run checked against a closed form or a balance that does not come from the analysis itself.

The pendulum (1 kg, centre 0.5 m from the hinge, 0.01 kg m^2 about it) starts at rest at
atan(0.3 / 0.4) from hanging, its body z axis horizontal so that the Euler angles of
``"re"`` are regular. Closed forms: the hanging equilibrium (centre at (0, 0, -0.5)), the
small-oscillation frequency sqrt(m g l / I_O) / (2 pi) with I_O = 0.01 + m l^2, the
driven pendulum's centre R_y(t) r0 (the driver turns it at 1 rad/s about y), and
Newton's law for the hinge's reaction on the bob, m rddot - m g, at every step.

The runs of the formulations other than the default (``"joint"``) are slow-marked (each
compiles its own program), but for ``kinematics`` in ``"se3"``, whose velocity rows (the
body twist, angular part first) differ from the other formulations' layout; the refusals
and the default's runs are cheap."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.formulations import FORMULATIONS

NAMES = ("rA", "rp", "re", "se3", "director", "rotmat", "joint")
ANALYSES = ("simulate", "kinematics", "static_equilibrium", "linearize", "modes",
            "simulate_batch", "reaction_forces")  # fmt: skip
M, L, I_C = 1.0, 0.5, 0.01
R0 = np.array([0.3, 0.0, -0.4])
H, T_END = 1e-3, 0.004

#: The pairs refused, with what their ValueError must say: the formulation, what it lacks
#: and the formulations that have it.
REFUSED = {
    ("kinematics", "rotmat"): r"'rotmat' has no absolute pose coordinates.*use one of "
    r"\['director', 'rA', 're', 'rp', 'se3'\] or 'joint'",
    ("linearize", "director"): r"'director' has no index-1 form; use one of "
    r"\['rA', 're', 'rotmat', 'rp', 'se3', 'joint'\]",
    ("modes", "director"): r"'director' has no index-1 form; use one of "
    r"\['rA', 're', 'rotmat', 'rp', 'se3', 'joint'\]",
}


def pendulum(driven: bool = False) -> mbd.Model:
    b = mbd.ModelBuilder("driven pendulum" if driven else "pendulum")
    b.add_body("bob", mass=M, inertia=[I_C] * 3, r=tuple(R0),
               A=[[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # fmt: skip
    b.revolute("hinge", body_i="ground", body_j="bob", point=(0, 0, 0), axis=(0, 1, 0))
    if driven:
        b.rotation_driver("turn", body_i="ground", body_j="bob", axis=(0, 1, 0), angle="t")
    return b.build()


def _rotation_y(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _check_simulate(model, formulation):
    sol = mbd.simulate(model, formulation=formulation, t_end=T_END, h=H)
    assert sol.formulation == formulation
    # released from rest: the first step moves the bob along the tangent of its circle
    assert np.linalg.norm(np.asarray(sol.r)[-1, 0]) == pytest.approx(L, abs=1e-13)
    assert np.asarray(sol.r)[-1, 0, 0] < R0[0]


def _check_kinematics(model, formulation):
    sol = mbd.kinematics(pendulum(driven=True), formulation=formulation, t_end=T_END, h=H)
    assert sol.formulation == formulation
    r, A = np.asarray(sol.r)[:, 0], np.asarray(sol.A)[:, 0]
    # director's and rp's (slow-marked) solves stop above round-off: 2.5e-13, 6.6e-15 measured
    tol = {"director": 1e-12, "rp": 3e-14}.get(formulation, ROUND_OFF)
    for k, t in enumerate(np.asarray(sol.t)):
        np.testing.assert_allclose(r[k], _rotation_y(t) @ R0, rtol=0, atol=tol)
    # turning at 1 rad/s about y: r_dot = e_y x r, r_ddot = -(x, 0, z), omega_bar = A^T e_y
    np.testing.assert_allclose(np.asarray(sol.rdot)[:, 0], np.cross([0.0, 1.0, 0.0], r),
                               rtol=0, atol=tol)  # fmt: skip
    np.testing.assert_allclose(np.asarray(sol.rddot)[:, 0], r * [-1.0, 0.0, -1.0], rtol=0,
                               atol=tol)  # fmt: skip
    np.testing.assert_allclose(np.asarray(sol.omega)[:, 0], A[:, 1, :], rtol=0, atol=tol)
    np.testing.assert_allclose(np.asarray(sol.omegadot)[:, 0], 0.0, rtol=0, atol=tol)


def _check_static_equilibrium(model, formulation):
    eq = mbd.static_equilibrium(model, formulation=formulation)
    np.testing.assert_allclose(np.asarray(eq.r)[0], [0.0, 0.0, -L], rtol=0, atol=5e-11)


def _frequency():
    return np.sqrt(M * 9.81 * L / (I_C + M * L * L)) / (2 * np.pi)


def _check_linearize(model, formulation):
    lin = mbd.linearize(model, formulation=formulation)
    assert lin.formulation == formulation
    omega = np.abs(np.linalg.eigvals(np.asarray(lin.A)).imag).max()
    assert omega / (2 * np.pi) == pytest.approx(_frequency(), rel=ROUND_OFF)


def _check_modes(model, formulation):
    modes = mbd.modes(model, formulation=formulation)
    assert np.asarray(modes.frequencies).max() == pytest.approx(_frequency(), rel=ROUND_OFF)


def _check_simulate_batch(model, formulation):
    sol = mbd.simulate_batch(mbd.stack_models([model, model]), formulation=formulation,
                             t_end=T_END, h=H)  # fmt: skip
    assert sol.formulation == formulation
    one = mbd.simulate(model, formulation=formulation, t_end=T_END, h=H)
    np.testing.assert_allclose(np.asarray(sol.r)[1], np.asarray(one.r), rtol=0, atol=ROUND_OFF)


def _check_reaction_forces(model, formulation):
    sol = mbd.simulate(model, formulation=formulation, t_end=T_END, h=H)
    reactions = mbd.diagnostics.reaction_forces(model, sol, per="joint")
    on_bob = np.asarray(reactions.force_j)[:, 0]  # the hinge's force on the bob
    newton = M * np.asarray(sol.rddot)[:, 0] - M * np.asarray(model.gravity)
    # director's reactions (slow-marked) come from its own multipliers: 4.8e-11 measured
    tol = 2e-10 if formulation == "director" else ROUND_OFF
    np.testing.assert_allclose(on_bob, newton, rtol=0, atol=tol)
    assert np.abs(on_bob).max() > 5.0  # the bob hangs on the hinge


CHECKS = {name: globals()[f"_check_{name}"] for name in ANALYSES}


def test_the_pairs_are_every_analysis_and_every_formulation_name():
    """A formulation registered later joins the pairs below, or this fails."""
    assert set(NAMES) == set(FORMULATIONS) | {"joint"}
    assert set(REFUSED) <= {(a, f) for a in ANALYSES for f in NAMES}


@pytest.fixture(scope="module")
def model():
    return pendulum()


def _pair(analysis, formulation):
    fast = formulation == "joint" or (analysis, formulation) in {*REFUSED, ("kinematics", "se3")}
    slow = not fast
    return pytest.param(analysis, formulation, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize(
    ("analysis", "formulation"), [_pair(a, f) for a in ANALYSES for f in NAMES]
)
def test_analysis_runs_in_the_formulation_or_names_the_alternatives(model, analysis, formulation):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        if (analysis, formulation) in REFUSED:
            with pytest.raises(ValueError, match=REFUSED[analysis, formulation]):
                CHECKS[analysis](model, formulation)
        else:
            CHECKS[analysis](model, formulation)
