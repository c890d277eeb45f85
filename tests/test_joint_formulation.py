"""formulation="joint" against MuJoCo C: the same files stepped by both, RK4, joint
coordinates compared (MuJoCo at h / 100 as the reference solution), with random controls."""

import os
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.joint_space.dynamics import accelerations
from jaxmbd.joint_space.run import model_tree
from jaxmbd.joint_space.steppers import get_stepper

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")


def _load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mbd.load_model(os.path.join(SUITE, name + ".xml"), keyframe=None)


def _mujoco_reference(path, qpos, qvel, controls, h, substeps=100):
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep = h / substeps
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    out = [np.array(d.qpos)]
    for u in controls:
        d.ctrl[:] = u
        for _ in range(substeps):
            mujoco.mj_step(m, d)
        out.append(np.array(d.qpos))
    return np.stack(out)


@pytest.mark.parametrize("name", ["cartpole", "acrobot"])
def test_rk4_against_mujoco_under_random_controls(name):
    model = _load(name)
    h, n = 1e-3, 300
    rng = np.random.default_rng(0)
    controls = rng.uniform(-1.0, 1.0, (n, model.nu))
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       controls=controls, limits="none", contact="none")  # fmt: skip
    tree = model.tree
    reference = _mujoco_reference(os.path.join(SUITE, name + ".xml"),
                                  np.asarray(tree.qpos_init), np.asarray(tree.qvel_init),
                                  controls, h)  # fmt: skip
    assert np.abs(np.asarray(sol.qpos) - reference).max() < 2e-11
    assert sol.qpos.shape == (n + 1, tree.nq) and sol.qvel.shape == (n + 1, tree.nv)
    for j, joint in enumerate(tree.joint_names):
        np.testing.assert_array_equal(sol.joints[joint].q, sol.qpos[:, tree.joint_qpos_adr[j]])


def test_joint_pairs_are_listed():
    pairs = mbd.valid_pairs()
    expected = {"rk", "rkmk", "euler", "implicit", "implicitfast", "gen_alpha", "backward_euler",
                "moreau_jean"}  # fmt: skip
    assert {("joint", name) for name in expected} <= set(pairs)
    with pytest.raises(ValueError, match="formulation 'joint' has no integrator"):
        mbd.simulate(_load("cartpole"), formulation="joint", integrator="energy_momentum",
                     t_end=0.01, h=1e-3)  # fmt: skip


@pytest.fixture(scope="module")
def acrobot():
    return _load("acrobot")


def _final_loss(model, controls, h=1e-3, n=100):
    sol = mbd.simulate(model, formulation="joint", integrator="rk", t_end=n * h, h=h,
                       controls=controls, limits="none", contact="none")  # fmt: skip
    return (sol.qpos[-1] ** 2).sum() + (sol.qvel[-1] ** 2).sum()


def test_gradients_against_central_differences(acrobot):
    """d loss / d (a body's mass, a joint's damping, the control sequence) by reverse mode
    through the joint-space steps against central differences (1e-6 relative)."""
    import dataclasses

    import equinox as eqx
    import jax
    import jax.numpy as jnp

    model = eqx.tree_at(lambda m: m.tree.qvel_init, acrobot, jnp.array([0.5, -0.3]))
    damping_index = next(k for k, f in enumerate(model.forces) if f.joint_damping is not None)
    controls = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, (100, model.nu)))

    def with_params(mass0, damping0, u):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass.at[0].set(mass0))
        element = m.forces[damping_index]
        element = dataclasses.replace(element, damping=element.damping.at[0].set(damping0))
        forces = m.forces[:damping_index] + (element,) + m.forces[damping_index + 1 :]
        return _final_loss(dataclasses.replace(m, forces=forces), u)

    mass0 = model.mass[0]
    damping0 = model.forces[damping_index].damping[0] + 0.05
    grads = jax.grad(with_params, argnums=(0, 1, 2))(mass0, damping0, controls)
    eps = 1e-6
    for k, (value, grad) in enumerate(zip((mass0, damping0), grads[:2], strict=True)):
        args = [mass0, damping0, controls]
        args[k] = value + eps
        up = with_params(*args)
        args[k] = value - eps
        down = with_params(*args)
        fd = (up - down) / (2 * eps)
        assert abs(grad - fd) <= 1e-6 * max(abs(fd), 1e-3), (k, grad, fd)
    direction = jnp.asarray(np.random.default_rng(3).normal(size=controls.shape))
    fd = (with_params(mass0, damping0, controls + eps * direction)
          - with_params(mass0, damping0, controls - eps * direction)) / (2 * eps)  # fmt: skip
    assert abs(jnp.sum(grads[2] * direction) - fd) <= 1e-6 * abs(fd)


def test_vmap_equals_loop(acrobot):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    rates = jnp.array([[0.1, 0.2], [-0.4, 0.3], [0.0, 1.0]])

    def final(rate):
        model = eqx.tree_at(lambda m: m.tree.qvel_init, acrobot, rate)
        sol = mbd.simulate(model, formulation="joint", t_end=0.05, h=1e-3, limits="none",
                           contact="none")  # fmt: skip
        return sol.qpos[-1]

    batched = jax.vmap(final)(rates)
    for k in range(rates.shape[0]):
        np.testing.assert_allclose(batched[k], final(rates[k]), rtol=0, atol=ROUND_OFF)


def test_policy_gradient_against_central_differences():
    """A linear feedback policy u = W [qpos, qvel] on the cart-pole, closed inside the
    compiled joint-space step: d loss / d W by reverse mode against central differences."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    model = eqx.tree_at(lambda m: m.tree.qvel_init, _load("cartpole"), jnp.array([0.3, -0.5]))

    class Linear(eqx.Module):
        W: jax.Array

        def __call__(self, t, obs):
            return jnp.tanh(self.W @ obs)

    def loss(W):
        sol = mbd.simulate(model, formulation="joint", t_end=0.1, h=1e-3, policy=Linear(W),
                           limits="none", contact="none")  # fmt: skip
        return jnp.sum(sol.qpos[-1] ** 2) + jnp.sum(sol.qvel[-1] ** 2)

    W = jnp.asarray(np.random.default_rng(4).normal(size=(model.nu, 4)) * 0.5)
    grad = jax.grad(loss)(W)
    direction = jnp.asarray(np.random.default_rng(5).normal(size=W.shape))
    eps = 1e-6
    fd = (loss(W + eps * direction) - loss(W - eps * direction)) / (2 * eps)
    assert abs(jnp.sum(grad * direction) - fd) <= 1e-6 * abs(fd)


#: a free body with a ball-jointed and a hinged child, unequal inertias (gyroscopic
#: accelerations), in gravity
SPINNING = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
<body name="base" pos="0 0 1"><freejoint/><geom type="box" size=".1 .2 .4"/>
 <body name="arm" pos="0 0 .4"><joint name="ball" type="ball"/>
  <geom type="capsule" fromto="0 0 0 .3 .1 0" size=".05"/>
  <body name="tip" pos=".3 .1 0"><joint name="hinge" axis="0 1 1"/>
   <geom type="box" size=".05 .1 .02" pos=".05 0 0"/></body></body></body>
</worldbody></mujoco>"""


@eqx.filter_jit
def _rk4_steps(model, qpos, qvel, h):
    """{"rk": qpos, "rkmk": qpos} one step of each from (qpos, qvel)."""
    tree, loops = model_tree(model)
    acc = accelerations(model, tree, loops, qpos, qvel, 0.0)
    return {name: get_stepper(name).step(model, tree, loops, qpos, qvel, acc, 0.0, h)[0]
            for name in ("rk", "rkmk")}  # fmt: skip


def test_mujoco_rk4_step_on_free_and_ball_joints(tmp_path):
    """One step of h = 0.01 s at fast spin from a random state, against MuJoCo's RK4 step:
    MuJoCo from 4.0 takes ``rkmk``'s (its stages' angular velocities with the
    Runge-Kutta-Munthe-Kaas correction), before 4.0 ``rk``'s; that one to 1e-13, the other
    scheme off by more than 1e-8 (the comparison tells the two apart)."""
    path = tmp_path / "spinning.xml"
    path.write_text(SPINNING)
    model = mbd.load_model(str(path), keyframe=None)
    m = mujoco.MjModel.from_xml_path(str(path))
    h = 0.01
    m.opt.timestep, m.opt.integrator = h, mujoco.mjtIntegrator.mjINT_RK4
    rng = np.random.default_rng(2)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
    mujoco.mj_normalizeQuat(m, d.qpos)
    d.qvel[:] = rng.uniform(-4.0, 4.0, m.nv)
    steps = _rk4_steps(model, jnp.asarray(d.qpos), jnp.asarray(d.qvel), h)
    mujoco.mj_step(m, d)
    mujocos = "rkmk" if int(mujoco.__version__.split(".")[0]) >= 4 else "rk"
    for name, qpos in steps.items():
        error = np.abs(np.asarray(qpos) - d.qpos).max()
        assert error < 1e-13 if name == mujocos else error > 1e-8, (name, error)
