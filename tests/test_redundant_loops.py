"""Closed loops as users draw them: redundant constraint rows found when the model is built,
dropped for the run (``redundant="drop"``, default) or refused (``"error"``).

References: Freudenstein's closed-form position analysis of the planar four-bar, the
slider crank's closed form, the six-body (Bricard-type) linkage's closure relation and
symmetry (Betsch & Leyendecker Sec. 5.4.2), central differences for gradients, and the
Newton-Euler balance of every body for the reactions.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.constraints.redundancy import find_redundancy

# planar Grashof crank-rocker: crank a, coupler b, rocker c, ground d (s + l <= p + q, the
# shortest link is the crank, next to the ground)
A_, B_, C_, D_ = 1.0, 3.5, 3.0, 4.0
THETA0 = np.pi / 3
Z = (0.0, 0.0, 1.0)


def freudenstein(theta2, a=A_, b=B_, c=C_, d=D_):
    """Rocker angle theta4 of the open branch from Freudenstein's equation
    K1 cos(t4) - K2 cos(t2) + K3 = cos(t2 - t4), solved in closed form."""
    k1, k2, k3 = d / a, d / c, (a * a - b * b + c * c + d * d) / (2 * a * c)
    big_a = np.cos(theta2) - k1 - k2 * np.cos(theta2) + k3
    big_b = -2.0 * np.sin(theta2)
    big_c = k1 - (k2 + 1.0) * np.cos(theta2) + k3
    return 2.0 * np.arctan2(-big_b - np.sqrt(big_b**2 - 4 * big_a * big_c), 2 * big_a)


def _rod(b, name, p, q, mass):
    e = (q - p) / np.linalg.norm(q - p)
    length = float(np.linalg.norm(q - p))
    # body y along the joint axes (global z): no body z along a joint axis, so the ZXZ
    # angles of re stay away from their singularity
    b.add_body(
        name,
        mass=mass,
        inertia=[1e-3, mass * length**2 / 12, mass * length**2 / 12],
        r=(p + q) / 2,
        axes=(e, Z),
    )


def four_bar(
    *, driven: bool, name="four_bar", gravity=(0.0, -9.81, 0.0), motor="6.283185307179586*t"
):
    """Four revolute joints with parallel axes (20 rows, 3 of them redundant), joints added
    around the loop so the last one (J4) closes it."""
    t4 = freudenstein(THETA0)
    o2, o4 = np.zeros(3), np.array([D_, 0.0, 0.0])
    pa = A_ * np.array([np.cos(THETA0), np.sin(THETA0), 0.0])
    pb = o4 + C_ * np.array([np.cos(t4), np.sin(t4), 0.0])
    b = mbd.ModelBuilder(name, gravity=gravity)
    _rod(b, "crank", o2, pa, 1.0)
    _rod(b, "coupler", pa, pb, 2.0)
    _rod(b, "rocker", o4, pb, 1.5)
    b.revolute("J1", body_i="ground", body_j="crank", point=o2, axis=Z)
    b.revolute("J2", body_i="crank", body_j="coupler", point=pa, axis=Z)
    b.revolute("J3", body_i="coupler", body_j="rocker", point=pb, axis=Z)
    b.revolute("J4", body_i="rocker", body_j="ground", point=o4, axis=Z)
    if driven:
        b.rotation_driver("motor", body_i="ground", body_j="crank", axis=Z, angle=motor)
    return b.build()


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        return fn(*args, **kwargs)


DRIVEN = four_bar(driven=True)
FREE = four_bar(driven=False)


def test_four_bar_redundancy_is_found_and_named():
    """3 of the 21 rows of the driven loop depend on the others: the out-of-plane rows of
    the closing joint J4 (its z force and both tilting couples); the rank is that of an SVD
    of the Jacobian; the warning names the rows and the loop, once per run."""
    info = DRIVEN.redundancy
    names = [DRIVEN.constraint_names[r] for r in info.dropped]
    assert names == ["J4.cd_z", "J4.perp1.dp1_a", "J4.perp1.dp1_b"]
    assert info.rank == 18
    assert info.loops == ((("J4",), ("rocker", "coupler", "crank", "ground", "rocker")),)
    from jaxmbd.constraints.equations import rA_terms

    zero = jnp.zeros((3, 3))
    _, G, _, _ = rA_terms(DRIVEN, DRIVEN.r0, DRIVEN.A0, zero, zero, 0.0)
    assert np.linalg.matrix_rank(np.asarray(G), tol=1e-10) == 18
    kept = [r for r in range(DRIVEN.nc) if r not in info.dropped]
    assert np.linalg.matrix_rank(np.asarray(G)[kept], tol=1e-10) == 18
    with pytest.warns(mbd.RedundancyWarning) as record:
        sol = mbd.kinematics(DRIVEN, t_end=0.1, h=0.05)
    assert len(record) == 1
    text = str(record[0].message)
    for name in names + ["J4", "rocker - coupler - crank - ground - rocker", "redundant='error'"]:
        assert name in text, text
    # the dropped rows carry zero, the kept ones their multipliers
    lam = np.asarray(sol.lam)
    assert lam.shape[1] == DRIVEN.nc
    assert np.all(lam[:, list(info.dropped)] == 0.0)
    assert np.abs(lam).max() > 1.0


def test_redundant_error_refuses_and_names_rows():
    for run in (
        lambda: mbd.kinematics(DRIVEN, t_end=0.1, h=0.05, redundant="error"),
        lambda: mbd.simulate(FREE, formulation="rA", t_end=0.1, h=0.05, redundant="error"),
    ):
        with pytest.raises(mbd.ModelError, match=r"J4\.cd_z.*J4\.perp1\.dp1_a.*closes the loop"):
            run()
    with pytest.raises(ValueError, match="redundant must be one of"):
        mbd.simulate(FREE, formulation="rA", t_end=0.1, h=0.05, redundant="least_squares")


def test_a_redundant_driver_is_refused():
    """The closing joint is the one added last to the loop, whatever its bodies' order; a
    driver with no freedom left (a second motor on the driven loop) is refused by the run."""
    b = mbd.ModelBuilder("over_driven", gravity=(0.0, -9.81, 0.0))
    t4 = freudenstein(THETA0)
    o4 = np.array([D_, 0.0, 0.0])
    pa = A_ * np.array([np.cos(THETA0), np.sin(THETA0), 0.0])
    pb = o4 + C_ * np.array([np.cos(t4), np.sin(t4), 0.0])
    _rod(b, "crank", np.zeros(3), pa, 1.0)
    _rod(b, "coupler", pa, pb, 2.0)
    _rod(b, "rocker", o4, pb, 1.5)
    b.revolute("J1", body_i="ground", body_j="crank", point=np.zeros(3), axis=Z)
    b.revolute("J2", body_i="crank", body_j="coupler", point=pa, axis=Z)
    b.revolute("J3", body_i="coupler", body_j="rocker", point=pb, axis=Z)
    b.revolute("J4", body_i="ground", body_j="rocker", point=o4, axis=Z)
    b.rotation_driver("m1", body_i="ground", body_j="crank", axis=Z, angle="t")
    b.rotation_driver("m2", body_i="ground", body_j="rocker", axis=Z, angle="t")
    model = b.build()
    with pytest.raises(mbd.ModelError, match="driven row.*'m2'.*no freedom left"):
        mbd.kinematics(model, t_end=0.1, h=0.05)


# re and se3 with -m slow: rows are dropped from the model before any formulation sees it;
# rA, rp (its normalisation rows follow the kept ones) and director (its own internal
# rows) in the default suite
@pytest.mark.parametrize(
    "formulation",
    ["rA", "director", *(pytest.param(f, marks=pytest.mark.slow) for f in ("rp", "re", "se3"))],
)
def test_four_bar_rocker_follows_freudenstein(formulation):
    """Driven crank, one full revolution in 20 steps: the rocker angle (its body x axis)
    equals Freudenstein's closed form to the Newton tolerance in every formulation with
    absolute poses; the loop closes (all 21 rows, the dropped ones included)."""
    sol = _quiet(mbd.kinematics, DRIVEN, formulation=formulation, t_end=1.0, h=0.05)
    ex = np.asarray(sol.A)[:, 2, :, 0]
    rocker = np.arctan2(ex[:, 1], ex[:, 0])
    expected = freudenstein(THETA0 + 2 * np.pi * np.asarray(sol.t))
    err = np.abs(np.angle(np.exp(1j * (rocker - expected))))
    # both to Newton's tolerance, each formulation its own (7e-14 and 2e-15 in rA, director)
    assert err.max() < 1e-9, err.max()
    assert np.ptp(np.unwrap(rocker)) > 0.5  # the rocker really rocks
    phi = np.asarray(mbd.diagnostics.position_residual(DRIVEN, sol))
    assert np.abs(phi).max() < 1e-9


@pytest.mark.slow  # an order study
def test_four_bar_free_swing_energy_second_order():
    """Free swing under gravity, rA gen_alpha at rho_inf = 1 (no numerical dissipation):
    the energy error falls at the integrator's second order (ratio ~4 per halving of h)."""
    drift = {}
    for h in (0.01, 0.005):
        # fixed 50-step chunks: one compiled program for both step sizes (without them the
        # step count is part of the program: two compilations)
        sol = _quiet(mbd.simulate, FREE, formulation="rA", integrator="gen_alpha", rho_inf=1.0,
                     t_end=0.5, h=h, progress=lambda done, total: None, chunk_size=50)  # fmt: skip
        total = np.asarray(mbd.diagnostics.energy(FREE, sol).total)
        drift[h] = np.abs(total - total[0]).max()
        phi = np.asarray(mbd.diagnostics.position_residual(FREE, sol))
        assert np.abs(phi).max() < 1e-9
    ratio = drift[0.01] / drift[0.005]
    assert 3.0 < ratio < 5.0, (drift, ratio)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("formulation", "integrator", "bound"),
    [("se3", "rkmk", 1e-4), ("director", "energy_momentum", 1e-10), ("rp", "gen_alpha", 0.2)],
)
def test_four_bar_free_swing_other_formulations(formulation, integrator, bound):
    """The same loop in the other formulations: energy_momentum conserves energy to
    round-off, rkmk to its fourth order, gen_alpha (rp, rho_inf = 1) to second order; every
    row (dropped ones included) stays closed."""
    opts = {"rho_inf": 1.0} if integrator == "gen_alpha" else {}
    sol = _quiet(
        mbd.simulate, FREE, formulation=formulation, integrator=integrator, t_end=0.5, h=0.005,
        **opts,
    )  # fmt: skip
    total = np.asarray(mbd.diagnostics.energy(FREE, sol).total)
    assert np.abs(total - total[0]).max() < bound
    assert np.abs(np.asarray(mbd.diagnostics.position_residual(FREE, sol))).max() < 1e-8


def test_reactions_balance_every_body():
    """Reactions per joint on the free four-bar: the dropped rows carry zero, and on every
    body the joint forces and torques with gravity give m a and J omegadot + omega x J
    omega to round-off at a Newton tolerance of 1e-14 (the resultant on each body is unique
    even though the split among redundant rows is not)."""
    sol = _quiet(mbd.simulate, FREE, formulation="rA", t_end=0.05, h=0.005, newton="full",
                 tol=1e-14)  # fmt: skip
    reac = mbd.diagnostics.reaction_forces(FREE, sol, per="joint")
    assert reac.names == ("J1", "J2", "J3", "J4")
    force = np.zeros(np.asarray(sol.r).shape)
    torque = np.zeros_like(force)
    joint_bodies = {"J1": ("ground", "crank"), "J2": ("crank", "coupler"),
                    "J3": ("coupler", "rocker"), "J4": ("rocker", "ground")}  # fmt: skip
    for k, name in enumerate(reac.names):
        for side, body in zip("ij", joint_bodies[name], strict=True):
            if body == "ground":
                continue
            b = FREE.body_names.index(body)
            force[:, b] += np.asarray(getattr(reac, f"force_{side}"))[:, k]
            torque[:, b] += np.asarray(getattr(reac, f"torque_{side}"))[:, k]
    m = np.asarray(FREE.mass)[None, :, None]
    J = np.asarray(FREE.inertia)
    w, wd = np.asarray(sol.omega), np.asarray(sol.omegadot)
    lin = m * np.asarray(sol.rddot) - (m * np.asarray(FREE.gravity) + force)
    ang = np.einsum("bij,tbj->tbi", J, wd) + np.cross(w, np.einsum("bij,tbj->tbi", J, w)) - torque
    assert np.abs(lin).max() < ROUND_OFF * np.abs(force).max()
    assert np.abs(ang).max() < ROUND_OFF * np.abs(torque).max()


def test_singular_configuration_mid_run_is_ill_conditioned():
    """A parallelogram four-bar (crank = rocker, coupler = ground) driven through its change
    point: at crank angle pi every link lies on one line and the kept rows' Jacobian is
    singular (a true singular configuration, not the structural redundancy). The drive
    lands there exactly at step 50: every step before succeeds, that step reports
    ILL_CONDITIONED, and throw=True raises naming it."""
    link, ground = 1.0, 4.0
    theta0 = np.pi / 3
    pa = link * np.array([np.cos(theta0), np.sin(theta0), 0.0])
    o4 = np.array([ground, 0.0, 0.0])
    b = mbd.ModelBuilder("parallelogram", gravity=(0.0, -9.81, 0.0))
    _rod(b, "crank", np.zeros(3), pa, 1.0)
    _rod(b, "coupler", pa, o4 + pa, 2.0)
    _rod(b, "rocker", o4, o4 + pa, 1.0)
    b.revolute("J1", body_i="ground", body_j="crank", point=np.zeros(3), axis=Z)
    b.revolute("J2", body_i="crank", body_j="coupler", point=pa, axis=Z)
    b.revolute("J3", body_i="coupler", body_j="rocker", point=o4 + pa, axis=Z)
    b.revolute("J4", body_i="rocker", body_j="ground", point=o4, axis=Z)
    rate = float((np.pi - theta0) / 0.5)  # crank angle pi exactly at t = 0.5
    b.rotation_driver("motor", body_i="ground", body_j="crank", axis=Z, angle=f"{rate!r}*t")
    model = b.build()
    assert len(model.redundancy.dropped) == 3
    sol = _quiet(mbd.kinematics, model, t_end=0.6, h=0.01, throw=False)
    status = np.asarray(sol.status)
    assert np.all(status[:50] == 0), status
    assert status[50] == mbd.ILL_CONDITIONED, status
    with pytest.raises(mbd.SolverError, match="step 50"):
        _quiet(mbd.kinematics, model, t_end=0.6, h=0.01)


def slider_crank(crank=1.0, rod=3.0, theta0=0.4):
    """Planar slider crank with a revolute at every pin and a translational slider (20
    rows on 3 bodies, 1 DOF: 3 redundant), crank driven at 2 pi rad/s."""
    pa = crank * np.array([np.cos(theta0), np.sin(theta0), 0.0])
    xs = crank * np.cos(theta0) + np.sqrt(rod**2 - (crank * np.sin(theta0)) ** 2)
    ps = np.array([xs, 0.0, 0.0])
    b = mbd.ModelBuilder("slider_crank_4r", gravity=(0.0, -9.81, 0.0))
    _rod(b, "crank", np.zeros(3), pa, 1.0)
    _rod(b, "rod", pa, ps, 2.0)
    b.add_body("slider", mass=1.0, inertia=[0.1, 0.1, 0.1], r=ps, axes=((1, 0, 0), Z))
    b.revolute("pin_O", body_i="ground", body_j="crank", point=np.zeros(3), axis=Z)
    b.revolute("pin_A", body_i="crank", body_j="rod", point=pa, axis=Z)
    b.revolute("pin_B", body_i="rod", body_j="slider", point=ps, axis=Z)
    b.translational("slide", body_i="ground", body_j="slider", point=ps, axis=(1.0, 0.0, 0.0))
    b.rotation_driver("motor", body_i="ground", body_j="crank", axis=Z, angle="6.283185307179586*t")
    return b.build()


def test_slider_crank_with_four_lower_pairs():
    """The slider's position over a full crank turn equals x = a cos(t) + sqrt(b^2 - a^2
    sin^2(t)); the 3 redundant rows are those of the slider's joint that closes the loop."""
    model = slider_crank()
    dropped = [model.constraint_names[r] for r in model.redundancy.dropped]
    assert len(dropped) == 3 and all(n.startswith("slide.") for n in dropped), dropped
    sol = _quiet(mbd.kinematics, model, t_end=1.0, h=0.05)
    theta = 0.4 + 2 * np.pi * np.asarray(sol.t)
    x = np.cos(theta) + np.sqrt(9.0 - np.sin(theta) ** 2)
    assert np.abs(np.asarray(sol.r)[:, 2, 0] - x).max() < 1e-9
    assert np.abs(np.asarray(sol.r)[:, 2, 1:]).max() < ROUND_OFF  # (lengths of ~1 m)


def test_six_body_linkage_in_rA():
    """The Bricard-type six-revolute loop (30 rows, rank 29) without dof=: the row dropped
    is the closing joint's with the largest self-stress share, and rA gen_alpha keeps the
    closure relation sin(t2) (1 - sin(t1)) = sin(t1), the symmetry t1 = t3 = t5, t2 = t4 and
    all 30 rows to the Newton tolerance (0.2 s, h = 0.01)."""
    from jaxmbd.models.betsch_leyendecker import six_body_joint_angles

    model = mbd.models.six_body_linkage()
    assert [model.constraint_names[r] for r in model.redundancy.dropped] == ["joint6.perp1.dp1_a"]
    sol = _quiet(mbd.simulate, model, formulation="rA", t_end=0.2, h=0.01)
    th = six_body_joint_angles(sol.A)
    s1, s2 = np.sin(th[:, 0]), np.sin(th[:, 1])
    assert np.abs(s2 * (1 - s1) - s1).max() < 3e-11
    assert np.abs(th[:, 0] - th[:, 2]).max() < 3e-11
    assert np.abs(th[:, 1] - th[:, 3]).max() < 2e-10
    assert np.ptp(th[:, 0]) > 0.5
    assert np.abs(np.asarray(mbd.diagnostics.position_residual(model, sol))).max() < 2e-10


def test_dropped_rows_do_not_depend_on_round_off():
    """The rows dropped are the pivots of a column-pivoted QR of the self-stresses Y^T, with
    exact ties (a symmetric mechanism's) broken by model order, not by round-off: two rows
    of equal share that differ in their last bits give the first row on either side, and
    without ties the pivots are LAPACK's (scipy's pivoted QR) for several dependencies."""
    import scipy.linalg

    from jaxmbd.constraints.redundancy import _pivots_breaking_ties

    tie = np.array([[0.3], [0.5392505715467617], [0.5392505715467619], [0.1]])
    assert _pivots_breaking_ties(tie, 1) == [1]
    assert _pivots_breaking_ties(tie[[0, 2, 1, 3]], 1) == [1]
    rng = np.random.default_rng(5)
    for k in (1, 2, 3):
        Y, _ = np.linalg.qr(rng.normal(size=(9, k)))
        _, _, lapack = scipy.linalg.qr(Y.T, pivoting=True, mode="economic")
        assert _pivots_breaking_ties(Y, k) == lapack[:k].tolist()
        turned = Y @ np.linalg.qr(rng.normal(size=(k, k)))[0]  # another basis, same space
        assert _pivots_breaking_ties(turned, k) == lapack[:k].tolist()


@pytest.mark.slow  # redundant rows under grad: ~10 s compile
def test_gradient_through_a_redundant_loop():
    """d(rocker angle at 0.2 s)/d(coupler mass) of the free four-bar (rA gen_alpha, rows
    dropped inside the differentiated program) against central differences."""
    coupler = FREE.body_names.index("coupler")

    def rocker_angle(mass):
        model = jax.tree_util.tree_map(lambda x: x, FREE)
        import equinox as eqx

        model = eqx.tree_at(lambda m: m.mass, model, model.mass.at[coupler].set(mass))
        sol = mbd.simulate(model, formulation="rA", t_end=0.2, h=0.01)
        ex = sol.A[-1, 2, :, 0]
        return jnp.arctan2(ex[1], ex[0])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbd.RedundancyWarning)
        grad = float(jax.grad(rocker_angle)(jnp.asarray(2.0)))
        eps = 1e-3
        fd = (float(rocker_angle(2.0 + eps)) - float(rocker_angle(2.0 - eps))) / (2 * eps)
    assert abs(grad) > 1e-4
    assert abs(grad - fd) < 1e-6 * max(1.0, abs(fd)), (grad, fd)


def test_find_redundancy_matches_svd_rank_on_builtins():
    """The priority-pivoted selection finds the SVD rank of every built-in model's Jacobian
    at its initial pose, and the kept rows have full rank."""
    from jaxmbd.constraints.equations import rA_terms

    for name in ("four_link", "slider_crank", "spherical_three_bar", "six_body_linkage"):
        model = mbd.models.load(name)
        info = find_redundancy(model)
        zero = jnp.zeros((model.nb, 3))
        _, G, _, _ = rA_terms(model, model.r0, model.A0, zero, zero, 0.0)
        s = np.linalg.svd(np.asarray(G), compute_uv=False)
        assert info.rank == int(np.sum(s > 1e-10 * s[0])), name
        kept = [r for r in range(model.nc) if r not in info.dropped]
        assert np.linalg.matrix_rank(np.asarray(G)[kept], tol=1e-10 * s[0]) == len(kept)


@pytest.mark.parametrize(
    ("formulation", "integrator"),
    [
        pair if pair in {("rA", "backward_euler"), ("rotmat", "rk")} else
        pytest.param(*pair, marks=pytest.mark.slow)
        for pair in mbd.valid_pairs()
    ],
)  # fmt: skip
def test_every_pair_runs_the_redundant_loop(formulation, integrator):
    """Every valid formulation x integrator pair steps the free four-bar (3 rows dropped):
    every step succeeds, all 20 rows (the dropped ones too) stay closed, and the dropped
    rows' multipliers are zero."""
    sol = _quiet(
        mbd.simulate, FREE, formulation=formulation, integrator=integrator, t_end=0.05, h=0.005
    )
    assert np.all(np.asarray(sol.status) == 0)
    phi = np.asarray(mbd.diagnostics.position_residual(FREE, sol))
    # Newton's tolerance, each pair its own (1.5e-12 in the default suite's; the -m slow pairs)
    assert np.abs(phi).max() < 1e-8, np.abs(phi).max()
    assert np.all(np.asarray(sol.lam)[:, list(FREE.redundancy.dropped)] == 0.0)


# -m slow (22 s, CI budget): the dropped rows are fixed when the model is built, so the
# vmapped program is simulate_batch's usual one (test_batch.py::test_batch_equals_loop);
# the rows dropped in a run are checked by default in test_gradient_through_a_redundant_loop
# and the single-run tests above
@pytest.mark.slow
def test_batched_redundant_loop_equals_single_runs():
    """simulate_batch over coupler masses (rows dropped inside the vmapped program) equals
    the single runs member by member."""
    import equinox as eqx

    coupler = FREE.body_names.index("coupler")
    masses = (1.5, 2.0, 3.0)
    members = [eqx.tree_at(lambda m: m.mass, FREE, FREE.mass.at[coupler].set(v)) for v in masses]
    batch = _quiet(mbd.simulate_batch, mbd.stack_models(members), formulation="rA", t_end=0.05,
                   h=0.005)  # fmt: skip
    for k, member in enumerate(members):
        single = _quiet(mbd.simulate, member, formulation="rA", t_end=0.05, h=0.005)
        assert np.abs(np.asarray(batch.r)[k] - np.asarray(single.r)).max() < 1e-12
        assert np.abs(np.asarray(batch.lam)[k] - np.asarray(single.lam)).max() < 1e-9
    assert np.all(np.asarray(batch.lam)[:, :, list(FREE.redundancy.dropped)] == 0.0)


def test_consistent_initial_state_drops_the_redundant_rows():
    """The public consistent start on a redundant loop solves without the dropped rows (it
    used to return NONFINITE multipliers there) and equals simulate's t = 0 state."""
    state, _, info = mbd.consistent_initial_state(FREE)
    assert int(info.status) == 0
    lam = np.asarray(state[6])
    assert lam.shape == (FREE.nc,) and np.all(lam[list(FREE.redundancy.dropped)] == 0.0)
    sol = _quiet(mbd.simulate, FREE, formulation="rA", t_end=0.05, h=0.005)
    np.testing.assert_allclose(
        np.asarray(sol.lam[0]), lam, rtol=0, atol=ROUND_OFF * np.abs(lam).max()
    )
    # below ROUND_OFF (0 here)
    np.testing.assert_allclose(np.asarray(sol.r[0]), np.asarray(state[0]), rtol=0, atol=1e-15)
