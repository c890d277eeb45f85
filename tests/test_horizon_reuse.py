"""A new t_end compiles nothing (jaxmbd/analysis/simulation.py, ``_run_blocks``).

Outside any transformation ``simulate`` runs blocks of a fixed number of steps, one
compiled program for every horizon, with the integrator's state carried from block to
block, and the number of steps of each block an input of the program. After a 0.2 s run,
a 0.5 s run of the same model and options traces and compiles nothing (the compile
counter, jax.monitoring events), and its trajectory equals the one program of the path
under a transformation (kept for gradients) to round-off: the loop of a counted number of
steps may round differently from the scan of a fixed one in the last bits."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from conftest import count_compilations
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.analysis import simulation

FIELDS = ("t", "r", "A", "rdot", "omega", "lam", "status", "iterations", "q", "v")
EXACT = ("t", "status", "iterations")
H = 1e-3


def _assert_round_off(a, b, name, rate=False):
    """``a`` equals ``b`` to round-off (relative to max(1, |b|)); a multiplier as the
    impulse h lam it is a step of (a last-bit change of a velocity is 1/h larger in it)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, name
    if not np.issubdtype(b.dtype, np.floating):  # flags and indices: equal
        np.testing.assert_array_equal(a, b, err_msg=name)
        return
    if rate:
        a, b = H * a, H * b
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    assert np.max(np.abs(a - b), initial=0.0) <= ROUND_OFF * scale, name


def _sliding_box():
    b = mbd.ModelBuilder("box", gravity=(0.0, 0.0, -9.81))
    b.add_body("box", mass=2.0, inertia=[2.0 * 0.2**2 / 6] * 3, r=(0, 0, 0.1),
               rdot=(2.0, 0.0, 0.0), shapes=[mbd.geometry.box([0.2] * 3)])  # fmt: skip
    b.add_ground_plane(point=(0, 0, 0), normal=(0, 0, 1))
    b.add_contact("box", "ground", friction=0.4, restitution=0.0)
    return b.build()


def _rail_and_rotor():
    b = mbd.ModelBuilder("driven", gravity=(0.0, 0.0, 0.0))
    b.add_body("block", mass=2.0, inertia=[1.0, 1.0, 1.0], r=(0, 0, 0))
    b.add_body("rotor", mass=1.0, inertia=[0.1, 0.1, 0.05], r=(0, 1, 0))
    b.translational("rail", body_i="ground", body_j="block", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("spin", body_i="ground", body_j="rotor", point=(0, 1, 0), axis=(0, 0, 1))
    b.add_actuator("push", joint="rail", kind="motor", gear=1.0)
    b.add_actuator("turn", joint="spin", kind="motor", gear=2.0)
    model = b.build()
    return dataclasses.replace(model, rdot0=model.rdot0.at[0, 0].set(0.5),
                               omega0=model.omega0.at[1, 2].set(1.0))  # fmt: skip


def _controls(t_end, h=1e-3):
    n = round(t_end / h)
    t = np.arange(n) * h
    return np.stack([np.sin(7.0 * t), 0.3 * np.cos(3.0 * t)], axis=1)


CASES = {
    "gen_alpha": (mbd.models.double_pendulum, {"formulation": "rA", "integrator": "gen_alpha"}),
    "rkmk": (mbd.models.double_pendulum, {"formulation": "rA", "integrator": "rkmk"}),
    "contact": (_sliding_box, {"formulation": "rA"}),
    "controls": (_rail_and_rotor, {"formulation": "rA", "controls": _controls}),
}


def _options(extra, t_end):
    return {k: (v(t_end) if callable(v) else v) for k, v in extra.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_a_new_horizon_compiles_nothing_and_gives_the_one_program_trajectory(case, monkeypatch):
    build, extra = CASES[case]
    model = build()
    mbd.simulate(model, t_end=0.2, h=1e-3, **_options(extra, 0.2))
    with count_compilations() as counts:
        sol = mbd.simulate(model, t_end=0.5, h=1e-3, **_options(extra, 0.5))
    assert counts == {"trace": 0, "compile": 0}, counts
    assert sol.r.shape[0] == 501
    # today's path: one program for the whole run (what a transformation gets)
    monkeypatch.setattr(simulation, "at_top_level", lambda: False)
    one = mbd.simulate(model, t_end=0.5, h=1e-3, **_options(extra, 0.5))
    for name in FIELDS:
        a, b = getattr(sol, name), getattr(one, name)
        if a is None:
            assert b is None, name
            continue
        if name in EXACT:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
        else:
            _assert_round_off(a, b, name, rate=name == "lam")
    if case == "contact":
        leaves = jax.tree_util.tree_leaves(sol.contact), jax.tree_util.tree_leaves(one.contact)
        assert len(leaves[0]) == len(leaves[1]) > 0
        for a, b in zip(*leaves, strict=True):
            _assert_round_off(a, b, "contact")


def test_a_failure_in_a_later_block_is_reported_at_its_step(monkeypatch):
    """Newton limited to 3 iterations first fails after two blocks of 64 steps (at step 149
    under the tests' XLA flags, 173 without them): the blocks report it at the same step and
    time as the one program, in sol.status and in the SolverError."""
    model = mbd.models.double_pendulum()
    options = {"formulation": "rA", "t_end": 1.0, "h": 2e-3, "max_iter": 3}
    monkeypatch.setattr(simulation, "BLOCK_STEPS", 64)
    blocks = mbd.simulate(model, throw=False, **options)
    with pytest.raises(mbd.SolverError) as raised:
        mbd.simulate(model, **options)
    monkeypatch.setattr(simulation, "at_top_level", lambda: False)
    one = mbd.simulate(model, throw=False, **options)
    with pytest.raises(mbd.SolverError) as raised_one:
        mbd.simulate(model, **options)
    status = np.asarray(blocks.status)
    assert np.nonzero(status)[0][0] > 2 * 64
    np.testing.assert_array_equal(status, np.asarray(one.status))
    assert str(raised.value) == str(raised_one.value)
