"""The MJCF importer's joint limits against MuJoCo's soft limits (``solref``/``solimp``,
:mod:`jaxmbd.mjcf._limit_gains`): the impedance d(r), the penetration at rest (a pendulum
on its stop, gymnasium's ant on its ankles) and the impact on a stop."""

import os

import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.forces.joint_limits import JointLimits, mujoco_impedance

mujoco = pytest.importorskip("mujoco")

# a rod on a hinge whose upper limit 0.3 rad gravity presses it against; {limit} sets the
# limit's solref/solimp
PENDULUM = """
<mujoco>
  <compiler angle="radian"/>
  <option timestep="1e-4" integrator="RK4"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="h" type="hinge" axis="0 1 0" range="-1 0.3" armature="0.02" {limit}/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.02" mass="1"/>
    </body>
  </worldbody>
  <keyframe><key qpos="{q0}" qvel="{v0}"/></keyframe>
</mujoco>
"""

#: (solreflimit, solimplimit): MuJoCo's default (rest penetration 0.64 mm, inside solimp's
#: width), a slower limit (3.1 mm, beyond the width), a stiff underdamped one
LIMITS = {
    "default": "",
    "slow": 'solreflimit="0.05 1"',
    "stiff": 'solreflimit="0.01 0.5" solimplimit="0.8 0.95 0.002"',
}
UPPER = 0.3


def _files(tmp_path, limit, q0, v0=0.0):
    xml = PENDULUM.format(limit=LIMITS[limit], q0=q0, v0=v0)
    path = tmp_path / "pendulum.xml"
    path.write_text(xml)
    return mujoco.MjModel.from_xml_string(xml), mbd.load_model(path)


def _mujoco_angles(m, t_end):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    out = []
    for _ in range(int(round(t_end / m.opt.timestep))):
        mujoco.mj_step(m, d)
        out.append(d.qpos[0])
    return np.array(out)


def _limits(model) -> JointLimits:
    return next(f for f in model.forces if isinstance(f, JointLimits))


@pytest.mark.parametrize(
    "solimp", [(0.9, 0.95, 0.001, 0.5, 2.0), (0.5, 0.99, 0.01, 0.3, 3.0), (0.7, 0.8, 0.02, 0.6, 1)]
)
def test_impedance_is_mujocos(solimp):
    """d(r) equals MuJoCo's efc_KBIP impedance of a violated limit, across solimp's width."""
    xml = PENDULUM.format(limit=f'solimplimit="{" ".join(map(str, solimp))}"', q0=0, v0=0)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for r in np.linspace(1e-5, 1.5 * solimp[2], 13):
        d.qpos[0] = UPPER + r
        mujoco.mj_forward(m, d)
        ours = mujoco_impedance(jnp.asarray(solimp), r)
        np.testing.assert_allclose(float(ours), d.efc_KBIP[0, 2], rtol=ROUND_OFF)


def test_spring_energy_is_the_integral_of_the_spring_force(tmp_path):
    """With MuJoCo's impedance the spring force is the derivative of the stored energy
    (scipy's quadrature of the force as the reference)."""
    from scipy.integrate import quad

    _, model = _files(tmp_path, "stiff", UPPER)
    limits = _limits(model)

    def force(r):
        return -float(limits.generalised_force(0.0, jnp.asarray([UPPER + r]), jnp.zeros(1))[0])

    for r in (3e-4, 1.5e-3, 5e-3):  # below the midpoint, between midpoint and width, beyond
        ours = float(limits.spring_energy(jnp.asarray([r]))[0])
        theirs = quad(force, 0.0, r, points=[1e-3, 2e-3], epsabs=0, epsrel=1e-12)[0]
        np.testing.assert_allclose(ours, theirs, rtol=4e-10)  # 8.6e-11


@pytest.mark.parametrize("limit", ["default", "slow", "stiff"])
def test_rest_penetration_is_mujocos(tmp_path, limit):
    """The rod resting on its stop sinks as deep as in MuJoCo (RK4 at 1e-4, 2 s to rest):
    to 1e-6 relative (equal laws at rest, the impedance followed across its width)."""
    m, model = _files(tmp_path, limit, UPPER)
    theirs = _mujoco_angles(m, 2.0)[-1] - UPPER
    sol = mbd.simulate(model, formulation="joint", limits="compliant", t_end=0.5, h=1e-3)
    ours = float(sol.qpos[-1, 0]) - UPPER
    assert theirs > 1e-4
    np.testing.assert_allclose(ours, theirs, rtol=3e-7)  # 5.9e-8


@pytest.mark.parametrize("limit", ["default", "slow"])
def test_impact_against_mujoco(tmp_path, limit):
    """The rod thrown onto its stop (6 rad/s) over 0.2 s: the same motion up to the stop and
    the same impact time; the force element stands for MuJoCo's soft constraint without
    its added inertia d / (1 - d) (:mod:`jaxmbd.mjcf._limit_gains`), so the impact
    penetrates sqrt(1 - d) as deep as MuJoCo's, d = d_max at these depths (to 10 %)."""
    m, model = _files(tmp_path, limit, 0.2, 6.0)
    theirs = _mujoco_angles(m, 0.2) - UPPER
    sol = mbd.simulate(model, formulation="joint", limits="compliant", t_end=0.2, h=1e-4)
    ours = np.asarray(sol.qpos[1:, 0]) - UPPER
    first = int(np.argmax(theirs > 0))
    assert first > 0 and np.argmax(ours > 0) == first
    np.testing.assert_allclose(ours[:first], theirs[:first], rtol=0, atol=ROUND_OFF)
    d_max = float(m.jnt_solimp[0, 1])
    assert theirs.max() > float(m.jnt_solimp[0, 2])  # beyond the width: d = d_max
    np.testing.assert_allclose(ours.max() / theirs.max(), np.sqrt(1 - d_max), rtol=0.1)


def test_ant_ankles_rest_as_in_mujoco():
    """gymnasium's ant standing at rest in MuJoCo (15 s, its RK4 at 0.01 s): at MuJoCo's
    ankle penetrations the ankles' limits push with MuJoCo's limit forces (to 1 %), so
    under MuJoCo's loads they sink as deep (about 4e-5 rad)."""
    gymnasium = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/ant.xml")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    assert np.max(np.abs(d.qvel)) < 2e-11
    limits = _limits(mbd.load_model(path, keyframe=None))
    rows = [i for i in range(d.nefc) if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT]
    ankles = 0
    for i in rows:
        j = int(d.efc_id[i])
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        k = limits.names.index(name)
        q = np.asarray(limits.lower).copy()  # every other limit unpenetrated
        q[k] = d.qpos[m.jnt_qposadr[j]]
        force = limits.generalised_force(0.0, jnp.asarray(q), jnp.zeros(len(q)))[k]
        # MuJoCo's force along the row's Jacobian, which is +1 at a lower, -1 at an upper
        lo, hi = m.jnt_range[j]
        theirs = d.efc_force[i] * (1.0 if abs(q[k] - lo) < abs(q[k] - hi) else -1.0)
        np.testing.assert_allclose(float(force), theirs, rtol=1e-7)  # 2.8e-8
        ankles += name.startswith("ankle")
        assert 1e-5 < -d.efc_pos[i] < 1e-4
    assert ankles == 4
