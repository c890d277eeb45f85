"""The kinematic tree's mass matrix and bias forces against MuJoCo C (``mj_fullM``,
``qfrc_bias`` of ``mj_forward``) at random states of dm_control's and gymnasium's files."""

import os

import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

from jaxmbd import tree as T

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

SUITE = os.path.join(os.path.dirname(dm_control.__file__), "suite")
FILES = [
    "humanoid",
    pytest.param("quadruped", marks=pytest.mark.slow),
    "point_mass",
    "acrobot",
    "cheetah",
]


def _random_state(m, rng):
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t in (2, 3):
            qpos[a] += 0.3 * rng.normal()
        else:
            k = a + (3 if t == 0 else 0)
            if t == 0:
                qpos[a : a + 3] += 0.2 * rng.normal(size=3)
            quat = rng.normal(size=4)
            qpos[k : k + 4] = quat / np.linalg.norm(quat)
    return qpos, rng.normal(size=m.nv)


@pytest.mark.parametrize("name", FILES)
def test_mass_matrix_and_bias_against_mujoco(name):
    m = mujoco.MjModel.from_xml_path(os.path.join(SUITE, name + ".xml"))
    d = mujoco.MjData(m)
    built = T.tree_from_mujoco(mujoco, m)
    gravity = np.zeros(3) if m.opt.disableflags & 128 else np.asarray(m.opt.gravity)
    rng = np.random.default_rng(1)
    for _ in range(2):
        qpos, qvel = _random_state(m, rng)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        poses = T.poses(built.tree, jnp.asarray(qpos))
        mass, inertia = jnp.asarray(built.mass), jnp.asarray(built.inertia)
        Mj = T.mass_matrix(built.tree, poses, mass, inertia, jnp.asarray(m.dof_armature))
        bias = T.bias_forces(built.tree, poses, mass, inertia, jnp.asarray(gravity),
                             jnp.asarray(qvel))  # fmt: skip
        scale = max(1.0, np.abs(M).max())
        np.testing.assert_allclose(np.asarray(Mj), M, rtol=0, atol=ROUND_OFF * scale)
        bscale = max(1.0, np.abs(d.qfrc_bias).max())
        np.testing.assert_allclose(np.asarray(bias), d.qfrc_bias, rtol=0, atol=ROUND_OFF * bscale)
        for k, b in enumerate(built.bodies):
            np.testing.assert_allclose(np.asarray(poses.x[k]), d.xpos[b], rtol=0, atol=2e-14)
            np.testing.assert_allclose(np.asarray(poses.R[k]).ravel(), d.xmat[b], rtol=0,
                                       atol=3e-14)  # fmt: skip
