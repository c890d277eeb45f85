"""MuJoCo's constraint rows and parameters (jaxmbd.soft_constraints.rows, .parameters) against
MuJoCo C: every efc row of dm_control's and gymnasium's robots and of small MJCF models, in
states with contacts and limits, compared with d.efc_* after mj_forward (dense Jacobians)."""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

mujoco = pytest.importorskip("mujoco")

from jaxmbd.soft_constraints import parameters as P  # noqa: E402
from jaxmbd.soft_constraints import rows as R  # noqa: E402

RTOL = ROUND_OFF  # the rows agree with MuJoCo's to 2.5e-16 relative


def _suite(name):
    dm_control = pytest.importorskip("dm_control")
    return os.path.join(os.path.dirname(dm_control.__file__), "suite", name)


def _gym(name):
    gymnasium = pytest.importorskip("gymnasium")
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", name)


# ----------------------------------------------------------------------------- harness


def contact_inputs(m, d):
    """Per-contact arrays of d.contact and the (6, nv) Jacobian differences (mj_jacDifPair:
    second body minus first, at the contact point), as jaxmbd's collision stage supplies them."""
    out = []
    for i in range(d.ncon):
        con = d.contact[i]
        b1, b2 = m.geom_bodyid[con.geom[0]], m.geom_bodyid[con.geom[1]]
        jac = []
        for b in (b1, b2):
            jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jac(m, d, jp, jr, con.pos, b)
            jac.append(np.concatenate([jp, jr]))
        out.append(
            dict(
                dim=int(con.dim),
                jac_dif=jac[1] - jac[0],
                frame=np.array(con.frame).reshape(3, 3),
                dist=float(con.dist),
                includemargin=float(con.includemargin),
                friction=np.array(con.friction),
                solref=np.array(con.solref),
                solreffriction=np.array(con.solreffriction),
                solimp=np.array(con.solimp),
                invweight=m.body_invweight0[b1] + m.body_invweight0[b2],
                exclude=int(con.exclude),
                mu=float(con.mu),
                adhesion=float(con.adhesion),
                id=i,
            )
        )
    return out


def dense_ten_J(m, d):
    """d.ten_J is sparse in MuJoCo 4.0 (rows by m.ten_J_rownnz, rowadr, colind)."""
    ten_J = np.zeros((m.ntendon, m.nv))
    if m.ntendon:
        mujoco.mju_sparse2dense(ten_J, d.ten_J, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind)
    return ten_J


def our_rows(m, d, *, with_qvel=True):
    """All rows jaxmbd builds for (m, d), in MuJoCo's efc order, the active ones only.

    The builders run as one program (as the solver calls them), not op by op: each eager
    primitive of a new shape compiles on its own (~350 of them a robot)."""
    options = P.SoftOptions.from_model(m)
    specs = (
        R.DofFrictionSpec.from_model(m),
        R.TendonFrictionSpec.from_model(m),
        R.JointLimitSpec.from_model(m),
        R.TendonLimitSpec.from_model(m),
    )
    contacts = contact_inputs(m, d)
    keys = ["jac_dif", "frame", "dist", "includemargin", "friction", "solref"]
    keys += ["solreffriction", "solimp", "invweight", "id", "adhesion"]
    by_dim = {}
    for dim in sorted({c["dim"] for c in contacts}):
        cs = [c for c in contacts if c["dim"] == dim]
        by_dim[dim] = {k: np.stack([np.asarray(c[k]) for c in cs]) for k in keys}
    state = dict(
        qpos=np.asarray(d.qpos),
        qvel=np.asarray(d.qvel) if with_qvel else None,
        ten_J=dense_ten_J(m, d),
        ten_length=np.asarray(d.ten_length),
    )
    ordered, count, rows = _build_rows(
        specs, state, by_dim, options=options, adhesion=bool(m.flg_adhesion)
    )
    return jax.tree.map(lambda x: np.asarray(x)[: int(count)], ordered), rows


@eqx.filter_jit
def _build_rows(specs, state, by_dim, *, options, adhesion):
    dof_friction, tendon_friction, joint_limit, tendon_limit = specs
    qvel, ten_J = state["qvel"], state["ten_J"]
    groups = [
        R.dof_friction_rows(dof_friction, qvel, options=options),
        R.tendon_friction_rows(tendon_friction, ten_J, qvel, options=options),
        R.joint_limit_rows(joint_limit, state["qpos"], qvel, options=options),
        R.tendon_limit_rows(tendon_limit, state["ten_length"], ten_J, qvel, options=options),
    ]
    for dim, c in by_dim.items():
        groups.append(
            R.contact_rows(
                c["jac_dif"],
                qvel,
                condim=dim,
                frame=c["frame"],
                dist=c["dist"],
                includemargin=c["includemargin"],
                friction=c["friction"],
                solref=c["solref"],
                solreffriction=c["solreffriction"],
                solimp=c["solimp"],
                invweight=c["invweight"],
                options=options,
                contact_id=c["id"],
                adhesion=c["adhesion"] if adhesion else None,
            )
        )
    rows = R.concatenate(*groups)
    order, count = R.mujoco_order(rows)
    return R.take(rows, order), count, rows


def _close(name, ours, ref, *, scale=None):
    """|ours - ref| <= RTOL (|ref| + scale), scale defaulting to max |ref| (Jacobian entries
    and velocities that cancel to ~0 are compared against their array's size)."""
    ours, ref = np.asarray(ours, dtype=float), np.asarray(ref, dtype=float)
    assert ours.shape == ref.shape, (name, ours.shape, ref.shape)
    if scale is None:
        scale = np.max(np.abs(ref), initial=0.0)
    err = np.abs(ours - ref)
    bound = RTOL * (np.abs(ref) + scale)
    worst = int(np.argmax(err - bound)) if err.size else 0
    assert np.all(err <= bound), (name, worst, ours.ravel()[worst], ref.ravel()[worst])


def compare(m, d, *, need=()):
    """Compare every row of (m, d) with MuJoCo's; ``need``: efc types that must occur."""
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    mujoco.mj_forward(m, d)
    nefc = d.nefc
    assert d.ne == 0, "equality rows are not built here"
    rows, _ = our_rows(m, d)
    types = np.asarray(d.efc_type[:nefc])
    for t in need:
        assert np.any(types == t), f"state has no rows of type {t}: {np.bincount(types)}"
    assert rows.size == nefc, (rows.size, nefc, np.asarray(rows.type), types)
    np.testing.assert_array_equal(np.asarray(rows.type), types)
    np.testing.assert_array_equal(np.asarray(rows.id), d.efc_id[:nefc])
    J = np.asarray(d.efc_J[: nefc * m.nv]).reshape(nefc, m.nv)
    _close("J", rows.J, J)
    _close("pos", rows.pos, d.efc_pos[:nefc])
    _close("margin", rows.margin, d.efc_margin[:nefc])
    _close("frictionloss", rows.frictionloss, d.efc_frictionloss[:nefc], scale=0.0)
    KBIP = np.asarray(d.efc_KBIP[: 4 * nefc]).reshape(nefc, 4)
    for k, name in enumerate("KBIP"):
        _close(f"KBIP[{name}]", rows.KBIP[:, k], KBIP[:, k], scale=0.0)
    _close("R", rows.R, d.efc_R[:nefc], scale=0.0)
    _close("D", rows.D, d.efc_D[:nefc], scale=0.0)
    _close("diagA", rows.diag_a, d.efc_diagA[:nefc], scale=0.0)
    _close("vel", rows.vel, d.efc_vel[:nefc])
    _close("aref", rows.aref, d.efc_aref[:nefc])
    # the regularised cone's mu (mj_makeImpedance writes mjContact.mu)
    for i in range(nefc):
        if types[i] in (6, 7):
            assert (
                abs(float(rows.mu[i]) - d.contact[d.efc_id[i]].mu)
                <= RTOL * d.contact[d.efc_id[i]].mu
            )
    # our in-gap exclusion is MuJoCo's
    for c in contact_inputs(m, d):
        kept = c["dist"] < c["includemargin"] or (c["adhesion"] != 0 and c["dim"] == 1)
        assert (c["exclude"] == 0) == kept
    return rows


def busy_state(m, *, steps=400, seed=0, score=lambda d: d.nefc):
    """The state of a random-control rollout (mj_step) with the most rows by ``score``."""
    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    rng = np.random.default_rng(seed)
    best, best_score = None, -1
    for _ in range(steps):
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)
        s = score(d)
        if s > best_score:
            best, best_score = (d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.time), s
    d.qpos[:], d.qvel[:], d.act[:], d.time = best
    return d


def _limits_and_contacts(d):
    types = d.efc_type[: d.nefc]
    return d.nefc + 100 * (np.any(types == 3) & np.any(types >= 5))


# ----------------------------------------------------------------------------- suite robots

ROBOTS = {
    "hopper": lambda: _suite("hopper.xml"),
    "cheetah": lambda: _suite("cheetah.xml"),
    "humanoid": lambda: _suite("humanoid.xml"),
    "walker": lambda: _suite("walker.xml"),
    "ant": lambda: _gym("ant.xml"),
}


def _robot(name, **opt):
    m = mujoco.MjModel.from_xml_path(ROBOTS[name]())
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    for key, value in opt.items():
        setattr(m.opt, key, value)
    return m


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_robot_rows_pyramidal(name):
    m = _robot(name)
    d = busy_state(m, score=_limits_and_contacts)
    compare(m, d, need=(6,) if name != "ant" else ())


@pytest.mark.parametrize("name", ["humanoid", "ant", "cheetah"])
def test_robot_rows_elliptic_impratio(name):
    m = _robot(name, cone=mujoco.mjtCone.mjCONE_ELLIPTIC, impratio=3.5)
    d = busy_state(m, score=_limits_and_contacts, seed=1)
    compare(m, d, need=(7,) if name != "ant" else ())


def test_robot_rows_perturbed_limits():
    """Humanoid pushed past its joint ranges: many limit rows, pos < 0."""
    m = _robot("humanoid")
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    lo, hi = m.jnt_range[:, 0], m.jnt_range[:, 1]
    for j in np.flatnonzero(m.jnt_limited):
        adr = m.jnt_qposadr[j]
        d.qpos[adr] = rng.uniform(lo[j] - 0.3, hi[j] + 0.3)
    d.qvel[:] = rng.normal(size=m.nv)
    rows = compare(m, d, need=(3,))
    assert np.any(np.asarray(rows.pos)[np.asarray(rows.type) == 3] < 0)


# ----------------------------------------------------------------------------- small models

CONTACTS_XML = """
<mujoco>
  <option timestep="0.005" {option}/>
  <default><geom solimp="0.8 0.95 0.02 0.4 3"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" condim="1" margin="0.01" gap="0.004"/>
    <body pos="0 0 .1"><freejoint/>
      <geom name="c1" type="sphere" size=".1" condim="1" solref="-2000 -30"/></body>
    <body pos="1 0 .098"><freejoint/>
      <geom name="c3" type="box" size=".1 .1 .1" condim="3" friction="0.7 0.01 0.002"/></body>
    <body pos="2 0 .099"><freejoint/>
      <geom name="c4" type="capsule" size=".1 .3" euler="0 90 0" condim="4"
            friction="0.9 0.02 0.001" solref="0.003 0.8"/></body>
    <body pos="3 0 .097"><freejoint/>
      <geom name="c6" type="ellipsoid" size=".2 .15 .1" condim="6" friction="0.6 0.03 0.004"/>
    </body>
    <body pos="4 0 .097"><freejoint/>
      <geom name="p6" type="sphere" size=".1"/></body>
    <body pos="5 0 .103"><freejoint/>
      <geom name="near" type="sphere" size=".1" condim="4"/></body>
    <body pos="6 0 .124"><freejoint/>
      <geom name="gap" type="sphere" size=".1" condim="6" margin="0.01" gap="0.004"/></body>
  </worldbody>
  <contact>
    <pair geom1="floor" geom2="p6" condim="6" friction="0.5 0.4 0.03 0.002 0.001"
          solref="0.01 0.7" solreffriction="-500 -12" solimp="0.7 0.9 0.01 0.3 1"/>
  </contact>
</mujoco>
"""


def _contacts_model(cone, option=""):
    m = mujoco.MjModel.from_xml_string(CONTACTS_XML.format(option=option))
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    m.opt.cone = cone
    d = mujoco.MjData(m)
    rng = np.random.default_rng(5)
    d.qvel[:] = 0.3 * rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)
    return m, d


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
@pytest.mark.parametrize(("impratio", "refsafe"), [(1.0, True), (4.0, True), (0.3, False)])
def test_contact_condims(cone, impratio, refsafe):
    """condim 1, 3, 4, 6 (geom and pair contacts), direct (negative) solref, a pair's
    solreffriction, power 1 and 3 impedances, in-gap contacts, impratio and refsafe."""
    kind = mujoco.mjtCone.mjCONE_ELLIPTIC if cone == "elliptic" else mujoco.mjtCone.mjCONE_PYRAMIDAL
    m, d = _contacts_model(kind)
    m.opt.impratio = impratio
    if not refsafe:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_REFSAFE
    mujoco.mj_forward(m, d)
    dims = {int(d.contact[i].dim) for i in range(d.ncon)}
    assert dims == {1, 3, 4, 6}, dims
    # a contact in the gap (excluded), one within its margin (dist > 0), the pair's
    # solreffriction in use
    assert {int(d.contact[i].exclude) for i in range(d.ncon)} == {0, 1}
    assert any(0 < d.contact[i].dist < d.contact[i].includemargin for i in range(d.ncon))
    assert any(
        d.contact[i].solreffriction[0] < 0 and not d.contact[i].exclude for i in range(d.ncon)
    )
    compare(m, d, need=(5, 7 if cone == "elliptic" else 6))


def test_refsafe_flag_from_mjcf():
    """``<flag refsafe="disable"/>`` read by SoftOptions.from_model: at h = 0.01 the mixed
    timeconsts (0.0115 for the capsule) then stay below 2 h."""
    plain = CONTACTS_XML.format(option="").replace('timestep="0.005"', 'timestep="0.01"')
    flagged = plain.replace("/>", "><flag refsafe='disable'/></option>", 1)
    m = mujoco.MjModel.from_xml_string(flagged)
    assert not P.SoftOptions.from_model(m).refsafe
    rows = compare(m, mujoco.MjData(m), need=(6,))
    on = mujoco.MjModel.from_xml_string(plain)
    assert P.SoftOptions.from_model(on).refsafe
    rows_on = compare(on, mujoco.MjData(on), need=(6,))
    assert not np.allclose(np.asarray(rows.KBIP), np.asarray(rows_on.KBIP))


CHAIN_XML = """
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.004" {option}/>
  <worldbody>
    <body>
      <joint name="h0" type="hinge" axis="0 1 0" range="-0.5 0.6" limited="true" margin="0.05"
             frictionloss="0.4" solreflimit="-8000 -60" solimplimit="0.85 0.97 0.02 0.3 1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
      <site name="s0" pos=".15 0 .05"/>
      <body pos=".3 0 0">
        <joint name="s1" type="slide" axis="1 0 0" range="-0.1 0.1" limited="true"
               frictionloss="0.2" solreffriction="0.05 0.5" solimpfriction="0.5 0.8 0.1 0.5 2"/>
        <geom type="box" size=".05 .05 .05"/>
        <body pos=".1 0 0">
          <joint name="b2" type="ball" range="0 0.7" limited="true" margin="0.02"
                 solreflimit="0.03 1.2"/>
          <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
          <site name="s2" pos=".3 0 .05"/>
          <body pos=".3 0 0">
            <joint name="h3" type="hinge" axis="0 0 1" range="-1 1" limited="true"
                   frictionloss="0.1"/>
            <geom type="sphere" size=".05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fixed" limited="true" range="-0.3 0.4" frictionloss="0.3" margin="0.01"
           solreflimit="0.02 0.9" solimplimit="0.9 0.99 0.01 0.5 2">
      <joint joint="h0" coef="1"/><joint joint="h3" coef="-0.5"/>
    </fixed>
    <spatial name="spatial" limited="true" range="0.2 0.55" frictionloss="0.05">
      <site site="s0"/><site site="s2"/>
    </spatial>
  </tendon>
</mujoco>
"""


def _chain_state(m, qpos_values, seed=0):
    d = mujoco.MjData(m)
    for name, value in qpos_values.items():
        j = m.joint(name)
        adr = m.jnt_qposadr[j.id]
        d.qpos[adr : adr + np.size(value)] = value
    d.qvel[:] = np.random.default_rng(seed).normal(size=m.nv)
    return d


def _quat(axis, angle_deg):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    a = np.deg2rad(angle_deg)
    return np.concatenate([[np.cos(a / 2)], np.sin(a / 2) * axis])


@pytest.mark.parametrize(
    "state",
    [
        # hinge below its range, slide above, ball past 0.7 rad, spatial tendon too long
        {"h0": -0.7, "s1": 0.12, "b2": _quat([0.3, 1, 0.2], 47), "h3": 0.98},
        # within margins only; ball quaternion with w < 0 (the angle wraps), unnormalised
        {"h0": 0.57, "s1": -0.099, "b2": -1.3 * _quat([1, -0.2, 0.5], 39), "h3": -0.2},
        # fixed tendon past its upper range
        {"h0": 0.55, "s1": 0.0, "b2": _quat([0, 0, 1], 10), "h3": -0.9},
    ],
)
def test_limits_friction_tendons(state):
    """Joint limits (hinge, slide, ball), tendon limits (fixed, spatial), dof and tendon
    friction loss, negative solref, power-1 impedance, margins."""
    m = mujoco.MjModel.from_xml_string(CHAIN_XML.format(option=""))
    d = _chain_state(m, state)
    rows = compare(m, d, need=(1, 2, 3) if "s1" in state and state["s1"] < 0 else (1, 2, 3, 4))
    assert not np.any(np.isnan(np.asarray(rows.aref)))


def test_ball_limit_rows():
    m = mujoco.MjModel.from_xml_string(CHAIN_XML.format(option=""))
    d = _chain_state(m, {"b2": _quat([0.3, 1, 0.2], 47)})
    mujoco.mj_forward(m, d)
    ball = m.joint("b2").id
    assert np.any((d.efc_type[: d.nefc] == 3) & (d.efc_id[: d.nefc] == ball))
    compare(m, d, need=(3,))


def test_limits_disabled():
    """``<flag limit="disable"/>``: no limit rows; friction rows remain."""
    m = mujoco.MjModel.from_xml_string(CHAIN_XML.format(option=""))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
    d = _chain_state(m, {"h0": -0.7, "s1": 0.12})
    assert not R.JointLimitSpec.from_model(m).joint.size
    assert not R.TendonLimitSpec.from_model(m).tendon.size
    compare(m, d, need=(1, 2))


# ----------------------------------------------------------------------------- parameters


def test_impedance_matches_scalar_reference():
    """impedance() against a direct transcription of getimpedance, over x in and out of
    [0, 1], powers 1, 2, 3, 1.5, flat and zero-width solimps."""

    def reference(solimp, pos, margin):
        s = list(solimp)
        s[0], s[1], s[3] = (min(0.9999, max(0.0001, s[k])) for k in (0, 1, 3))
        s[2], s[4] = max(0.0, s[2]), max(1.0, s[4])
        if s[0] == s[1] or s[2] <= 1e-15:
            return 0.5 * (s[0] + s[1]), 0.0
        x = (pos - margin) / s[2]
        sgn = 1.0
        if x < 0:
            x, sgn = -x, -1.0
        if x >= 1 or x <= 0:
            return (s[1] if x >= 1 else s[0]), 0.0
        if s[4] == 1:
            y, yp = x, 1.0
        elif x <= s[3]:
            a = 1 / s[3] ** (s[4] - 1)
            y, yp = a * x ** s[4], s[4] * a * x ** (s[4] - 1)
        else:
            b = 1 / (1 - s[3]) ** (s[4] - 1)
            y, yp = 1 - b * (1 - x) ** s[4], s[4] * b * (1 - x) ** (s[4] - 1)
        return s[0] + y * (s[1] - s[0]), yp * sgn * (s[1] - s[0]) / s[2]

    solimps = [
        (0.9, 0.95, 0.001, 0.5, 2),
        (0.5, 0.99, 0.1, 0.3, 1),
        (0.2, 0.9, 0.05, 0.7, 3),
        (0.95, 0.2, 0.02, 0.5, 1.5),
        (0.9, 0.9, 0.01, 0.5, 2),
        (0.9, 0.95, 0.0, 0.5, 2),
        (-1, 2, 0.1, 0, 0.5),
    ]
    # off the saturation points, where the slope of a power < 2 is ill-conditioned in x
    pos = np.linspace(-0.15, 0.15, 41) + 0.0013
    for s in solimps:
        imp, slope = P.impedance(jnp.asarray(pos), 0.01, jnp.asarray(s, dtype=float))
        ref = np.array([reference(s, p, 0.01) for p in pos])
        np.testing.assert_allclose(np.asarray(imp), ref[:, 0], rtol=ROUND_OFF, atol=0)
        np.testing.assert_allclose(np.asarray(slope), ref[:, 1], rtol=ROUND_OFF, atol=ROUND_OFF)


def test_mixed_solref_replaced():
    ref = P.safe_solref(jnp.array([[0.01, -3.0], [-100.0, -3.0], [0.001, 1.0]]), timestep=0.002)
    np.testing.assert_array_equal(np.asarray(ref), [[0.02, 1.0], [-100.0, -3.0], [0.004, 1.0]])
    f = P.safe_solref(jnp.array([0.01, -3.0]), timestep=0.002, friction=True)
    np.testing.assert_array_equal(np.asarray(f), [0.0, 0.0])


def test_inactive_slots_finite_under_jit_vmap_grad():
    """Fixed shapes: a batch of states (some slots inactive, a ball joint at the identity) under
    jit and vmap, the specs passed as traced arguments; values and gradients with respect to
    qpos stay finite, inactive rows are zero, and each state's active rows are MuJoCo's."""
    m = mujoco.MjModel.from_xml_string(CHAIN_XML.format(option=""))
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    specs = (R.JointLimitSpec.from_model(m), R.TendonLimitSpec.from_model(m))
    options = P.SoftOptions.from_model(m)

    @jax.jit
    def loss(specs, qpos, qvel, ten_length, ten_J):
        rows = R.concatenate(
            R.joint_limit_rows(specs[0], qpos, qvel, options=options),
            R.tendon_limit_rows(specs[1], ten_length, ten_J, qvel, options=options),
        )
        value = jnp.sum(rows.aref**2) + jnp.sum(rows.R) + jnp.sum(rows.KBIP) + jnp.sum(rows.J**2)
        return value, rows

    states = [{}, {"h0": -0.7, "h3": 0.98}, {"b2": _quat([0, 1, 0], 50), "h0": 0.55, "h3": -0.9}]
    data = [_chain_state(m, st, seed=i) for i, st in enumerate(states)]
    for d in data:
        mujoco.mj_forward(m, d)
    batch = [
        np.stack([d.qpos for d in data]),
        np.stack([d.qvel for d in data]),
        np.stack([d.ten_length for d in data]),
        np.stack([dense_ten_J(m, d) for d in data]),
    ]
    grad = jax.vmap(jax.grad(loss, argnums=1, has_aux=True), in_axes=(None, 0, 0, 0, 0))
    grads, rows = grad(specs, *[jnp.asarray(x) for x in batch])
    assert np.all(np.isfinite(np.asarray(grads)))
    for leaf in jax.tree.leaves(rows):
        assert np.all(np.isfinite(np.asarray(leaf)))
    active = np.asarray(rows.active)
    assert np.all(np.asarray(rows.J)[~active] == 0)
    assert np.all(np.asarray(rows.aref)[~active] == 0)
    for b, d in enumerate(data):
        limits = np.isin(d.efc_type[: d.nefc], (3, 4))
        assert active[b].sum() == limits.sum()
        _close("aref", np.asarray(rows.aref[b])[active[b]], d.efc_aref[: d.nefc][limits])
    assert active[0].sum() == 0 and active[1].sum() >= 2 and active[2].sum() >= 2


def test_detects_wrong_values():
    """The comparison can fail: a wrong impratio, or the impedance left out of K's term."""
    m, d = _contacts_model(mujoco.mjtCone.mjCONE_ELLIPTIC, 'impratio="4"')
    m.opt.impratio = 1.0
    rows, _ = our_rows(m, d)
    mujoco.mj_forward(m, d)
    m.opt.impratio = 4.0
    mujoco.mj_forward(m, d)
    with pytest.raises(AssertionError):
        _close("R", rows.R, d.efc_R[: d.nefc], scale=0.0)
    K, B, imp = (np.asarray(rows.KBIP[:, k]) for k in range(3))
    no_imp = -B * np.asarray(rows.vel) - K * (np.asarray(rows.pos) - np.asarray(rows.margin))
    with pytest.raises(AssertionError):
        _close("aref", no_imp, d.efc_aref[: d.nefc])
    assert np.any(imp < 1)


# ----------------------------------------------------------------------------- equality

EQUALITY_XML = """
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <worldbody>
    <body name="a" pos="0 0 1"><freejoint/>
      <geom type="box" size=".1 .2 .05" contype="0" conaffinity="0"/>
      <site name="sa" pos=".1 .1 0" quat="0.9 0.1 0.3 0.2"/></body>
    <body name="b" pos=".25 0 1.05"><freejoint/>
      <geom type="sphere" size=".08" contype="0" conaffinity="0"/>
      <site name="sb" pos="0 0 .05"/></body>
    <body name="c" pos="0 1 1">
      <joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
      <body pos=".3 0 0"><joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t1"><joint joint="j1" coef="1"/></fixed>
    <fixed name="t2"><joint joint="j2" coef="0.5"/></fixed>
  </tendon>
  <equality>
    <connect body1="a" body2="b" anchor=".1 0 .05" solref="0.01 0.8" solimp="0.5 0.99 0.3 0.5 2"/>
    <weld site1="sa" site2="sb" torquescale="2" solimp="0.8 0.95 0.5 0.4 3"/>
    <connect site1="sb" site2="sa" solref="-3000 -40"/>
    <joint joint1="j1" joint2="j2" polycoef="0.1 0.5 0.2 0 0"/>
    <tendon tendon1="t1" tendon2="t2" polycoef="0 1 0 0 0" solimp="0.5 0.9 0.2 0.5 1"/>
    <weld body1="a" solref="0.004 1"/>
  </equality>
</mujoco>
"""


def _equality_jacobian(m, d):
    mujoco.mj_forward(m, d)
    ne = d.ne
    return np.asarray(d.efc_J[: ne * m.nv]).reshape(ne, m.nv).copy()


def test_equality_rows():
    """Connect (body and site semantics, direct solref), weld (site, torquescale; body to
    world), joint and tendon equalities: J and pos taken from MuJoCo (jaxmbd's kinematics
    computes its own), J_dot qvel by central differences; diagApprox, KBIP, R, D to 1e-12,
    aref to 1e-7 of its scale (the differences' error)."""
    m = mujoco.MjModel.from_xml_string(EQUALITY_XML)
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    d = mujoco.MjData(m)
    rng = np.random.default_rng(11)
    d.qpos[:] += 0.05 * rng.normal(size=m.nq)
    d.qvel[:] = rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)
    ne = d.ne
    assert ne == 3 + 6 + 3 + 1 + 1 + 6
    J = _equality_jacobian(m, d)

    # J_dot qvel: d/dt of J(q(t)) at fixed qvel
    eps = 1e-6
    dd = mujoco.MjData(m)
    shifted = []
    for sign in (1.0, -1.0):
        dd.qpos[:] = d.qpos
        mujoco.mj_integratePos(m, dd.qpos, d.qvel, sign * eps)
        shifted.append(_equality_jacobian(m, dd))
    jdot_qvel = (shifted[0] - shifted[1]) / (2 * eps) @ d.qvel

    options = P.SoftOptions.from_model(m)
    efc_id, pos = d.efc_id[:ne], d.efc_pos[:ne]
    inputs = []
    for kind in ("connect", "weld", "joint", "tendon"):
        spec = R.EqualitySpec.from_model(m, kind)
        sel = np.concatenate([np.flatnonzero(efc_id == i) for i in spec.eq_id])
        jdot = jdot_qvel[sel] if kind in ("connect", "weld") else None
        inputs.append((spec, J[sel], pos[sel], jdot))

    @eqx.filter_jit  # one program, not ~100 primitives compiled one by one
    def build(inputs, qvel):
        groups = [
            R.equality_rows(spec, J, pos, qvel, options=options, jdot_qvel=jdot)
            for spec, J, pos, jdot in inputs
        ]
        rows = R.concatenate(*groups)
        order, count = R.mujoco_order(rows)
        return R.take(rows, order), count

    rows, count = build(inputs, d.qvel)
    rows = jax.tree.map(lambda x: np.asarray(x)[: int(count)], rows)
    assert int(count) == ne
    np.testing.assert_array_equal(np.asarray(rows.id), efc_id)
    np.testing.assert_array_equal(np.asarray(rows.type), d.efc_type[:ne])
    KBIP = np.asarray(d.efc_KBIP[: 4 * ne]).reshape(ne, 4)
    for k, name in enumerate("KBIP"):
        _close(f"KBIP[{name}]", rows.KBIP[:, k], KBIP[:, k], scale=0.0)
    _close("R", rows.R, d.efc_R[:ne], scale=0.0)
    _close("D", rows.D, d.efc_D[:ne], scale=0.0)
    _close("diagA", rows.diag_a, d.efc_diagA[:ne], scale=0.0)
    _close("vel", rows.vel, d.efc_vel[:ne])
    scale = np.max(np.abs(d.efc_aref[:ne]))
    np.testing.assert_allclose(np.asarray(rows.aref), d.efc_aref[:ne], rtol=0, atol=2e-13 * scale)
    # joint and tendon couplings carry no J_dot term: exact
    coupling = np.isin(m.eq_type[efc_id], (2, 3))
    _close("aref", np.asarray(rows.aref)[coupling], d.efc_aref[:ne][coupling])
    # and the connect/weld term matters: leaving it out is far beyond the tolerance
    assert np.max(np.abs(jdot_qvel[~coupling])) > 1e3 * 1e-7 * scale


ADHESION_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 .1" adhesion="3" margin="0.005" gap="0.01"/>
    <body pos="0 0 .099"><freejoint/><geom type="sphere" size=".1"/></body>
    <body pos="1 0 .1003"><freejoint/><geom type="box" size=".1 .1 .1" condim="4"/></body>
    <body pos="2 0 .108"><freejoint/><geom type="sphere" size=".1" condim="6"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_adhesion(cone):
    """MuJoCo 4.0's adhesive contacts: aref + R adhesion (spread over pyramid edges), and a
    contact in the gap kept with condim 1."""
    m = mujoco.MjModel.from_xml_string(ADHESION_XML)
    m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    d = mujoco.MjData(m)
    d.qvel[:] = 0.2 * np.random.default_rng(2).normal(size=m.nv)
    mujoco.mj_forward(m, d)
    gap = [i for i in range(d.ncon) if d.contact[i].dist >= d.contact[i].includemargin]
    assert gap and all(d.contact[i].dim == 1 and not d.contact[i].exclude for i in gap)
    compare(m, d, need=(5, 7 if cone == "elliptic" else 6))
    # the same in-gap contact in its geometric condim-6 group is dropped
    c = contact_inputs(m, d)[gap[0]]
    rows = R.contact_rows(
        c["jac_dif"][None],
        d.qvel,
        condim=6,
        options=P.SoftOptions.from_model(m),
        **{
            k: np.asarray(c[k])[None]
            for k in (
                "frame",
                "dist",
                "includemargin",
                "friction",
                "solref",
                "solreffriction",
                "solimp",
                "invweight",
                "adhesion",
            )
        },
    )
    assert not np.any(np.asarray(rows.active))
