"""Rangefinders (MuJoCo's ``mj_ray`` from a site along its z axis) and the ray tests of
:mod:`jaxmbd.geometry._ray_cast`, against MuJoCo C: ``mju_rayGeom`` on random rays for each shape,
and a model's ``sensordata`` at random states (1e-10)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import same_sensor_options
from scipy.spatial.transform import Rotation
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.geometry._ray_cast import RAY_SHAPES, ray_distance

mujoco = pytest.importorskip("mujoco")


def test_ray_tests_are_mujocos():
    """Each shape (planes bounded and unbounded) against ``mju_rayGeom`` on 300 rays
    aimed near it from random points (hits and misses both), 1e-12."""
    rng = np.random.default_rng(0)
    distance = jax.jit(ray_distance, static_argnums=0)
    for kind in RAY_SHAPES:
        geom_type = int(getattr(mujoco.mjtGeom, f"mjGEOM_{kind.upper()}"))
        theirs, ours = [], []
        for k in range(300):
            size = rng.uniform(0.1, 1.0, 3)
            if kind == "plane" and k % 3 == 0:
                size[:2] = 0.0  # unbounded
            pos, rot = rng.normal(size=3), Rotation.random(random_state=rng).as_matrix()
            start = pos + rng.normal(size=3) * 1.5
            vec = (pos + rng.normal(size=3) * 0.5 - start) * rng.uniform(0.3, 3.0)
            theirs.append(mujoco.mju_rayGeom(pos, rot.ravel(), size, start, vec, geom_type))
            ours.append(float(distance(kind, *map(jnp.asarray, (size, pos, rot, start, vec)))))
        theirs = np.array(theirs)
        assert 30 < np.sum(theirs >= 0) < 290, kind
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=5e-14, err_msg=kind)


def test_ray_distance_is_differentiable_where_it_hits():
    """The distance to a sphere's surface against the closed form's derivative: for a ray
    from p along unit v, x = -p.v - sqrt((p.v)^2 - |p|^2 + R^2), dx/dR = -R / sqrt(...)."""
    p, v, R = jnp.array([0.1, -0.2, 2.0]), jnp.array([0.0, 0.0, -1.0]), 0.5
    grad = jax.grad(lambda R: ray_distance("sphere", jnp.array([R, 0, 0]), jnp.zeros(3),
                                           jnp.eye(3), p, v))(R)  # fmt: skip
    b = float(p @ v)
    assert float(grad) == pytest.approx(
        -R / np.sqrt(b * b - float(p @ p) + R * R), rel=ROUND_OFF, abs=0
    )


# a free body and an arm carrying every ray-testable geom kind, rangefinders on the free
# body (its own geoms unseen), on the arm and on the world; an invisible geom (alpha 0)
# and one in a transparent material, which mj_ray skips
RAY_XML = """
<mujoco model="rays">
  <asset><material name="glass" rgba="1 1 1 0"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1"/>
    <geom name="wall" type="plane" size="1 2 .1" pos="2 0 1" zaxis="-1 0 0"/>
    <geom name="post" type="cylinder" size=".2 .8" pos="-1 1 .8"/>
    <site name="world" pos="0 0 .01" zaxis="0.2 0.1 1"/>
    <body name="probe" pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".05 .05 .05"/>
      <site name="down" pos="0 0 -.06" zaxis="0 0 -1"/>
      <site name="side" pos=".06 0 0" zaxis="1 0 0"/>
      <site name="tilted" pos="0 .06 0" zaxis="0.3 1 -0.4"/>
    </body>
    <body name="arm" pos="0.5 0.5 0.5">
      <joint type="ball"/>
      <geom type="capsule" fromto="0 0 0 .4 0 0" size=".05"/>
      <geom type="ellipsoid" pos=".5 0 0" size=".1 .2 .15"/>
      <geom type="sphere" pos="0 .3 0" size=".1"/>
      <geom type="box" pos="0 -.3 0" size=".1 .05 .2" euler="10 20 30"/>
      <geom type="cylinder" pos="0 0 .3" size=".08 .1"/>
      <geom type="sphere" pos="0 0 -.3" size=".2" rgba="1 0 0 0"/>
      <geom type="sphere" pos=".3 .3 0" size=".2" material="glass"/>
      <site name="arm" pos=".2 0 .1" zaxis="-1 -1 0"/>
    </body>
  </worldbody>
  <sensor>
    <rangefinder name="down" site="down"/>
    <rangefinder name="side" site="side"/>
    <rangefinder name="tilted" site="tilted"/>
    <rangefinder name="arm" site="arm"/>
    <rangefinder name="world" site="world"/>
  </sensor>
</mujoco>
"""


def test_rangefinders_match_sensordata(tmp_path):
    """Five rangefinders at 12 random states (the probe turned every way, the arm on its
    ball joint): sensordata to 1e-10, hits and misses (-1) both."""
    path = tmp_path / "rays.xml"
    path.write_text(RAY_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    same_sensor_options(model, tmp_path)
    rng = np.random.default_rng(1)
    names = model.sensors.sensor_names

    def row(q):
        values = mbd.read_sensors(model, q, jnp.zeros(m.nv))
        return jnp.concatenate([values[n] for n in names])

    read = jax.jit(jax.vmap(row))
    qpos = []
    for _ in range(12):
        q = np.array(m.qpos0)
        q[:3] = rng.uniform(-0.5, 0.5, 3) + [0, 0, 1]
        for a in (3, 7):
            w = rng.normal(size=4)
            q[a : a + 4] = w / np.linalg.norm(w)
        qpos.append(q)
    theirs = []
    for q in qpos:
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        theirs.append(np.array(d.sensordata))
    theirs = np.array(theirs)
    ours = np.asarray(read(jnp.asarray(np.array(qpos))))
    assert np.sum(theirs >= 0) > 20 and np.sum(theirs < 0) > 3
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=ROUND_OFF)
