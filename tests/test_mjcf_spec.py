"""A model edited in code (``mujoco.MjSpec``) loads as the file it compiles to: dm_control's
quadruped as its walk task builds it, and a spec that does not compile gets an error naming
it."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.envs.quadruped import make_spec

mujoco = pytest.importorskip("mujoco")
dm_control = pytest.importorskip("dm_control")

QUADRUPED = os.path.join(os.path.dirname(dm_control.__file__), "suite", "quadruped.xml")


def _walk_spec():
    """``quadruped.make_model(floor_size=10)``: no walls, ball, target, terrain or
    rangefinders."""
    return make_spec(floor_size=10.0)


def test_an_edited_spec_loads_as_the_file_it_compiles_to(tmp_path):
    spec = _walk_spec()
    assert spec.geom("floor").size[0] == 10.0
    from_spec = mbd.load_model(spec)
    path = tmp_path / "quadruped_walk.xml"
    path.write_text(spec.to_xml())
    from_file = mbd.load_model(path)
    assert from_spec.name == from_file.name == "quadruped"
    assert from_spec.tree.body_names == from_file.tree.body_names
    assert "ball" not in from_spec.tree.body_names  # the edit took
    # the spec's own numbers (the XML that to_xml writes rounds them to ~6 digits)
    m = spec.compile()
    assert float(np.sum(from_spec.mass)) == pytest.approx(float(np.sum(m.body_mass)), rel=ROUND_OFF)
    np.testing.assert_array_equal(from_spec.tree.qpos_init, m.qpos0)
    names = from_spec.sensors.sensor_names
    assert names == from_file.sensors.sensor_names
    assert not [n for n in names if n.startswith("rf_")]
    # the floor and the legs, no terrain: no height-field pairs in MuJoCo's constraint model
    groups = from_spec.constraint_model.contacts
    assert groups and not [g for g in groups if g.window]
    pairs = sum(len(g.body1) for g in groups)
    assert pairs == sum(len(g.body1) for g in from_file.constraint_model.contacts)
    # fewer than the whole file's: no terrain, walls or ball to collide with
    whole = mbd.load_model(QUADRUPED).constraint_model.contacts
    assert pairs < sum(len(g.body1) for g in whole)


def test_a_spec_that_does_not_compile_is_named():
    spec = mujoco.MjSpec.from_string(
        "<mujoco model='broken'><worldbody><body><freejoint/>"
        "<geom type='mesh' mesh='missing'/></body></worldbody></mujoco>"
    )
    with pytest.raises(mbd.ModelFileError, match=r"<MjSpec 'broken'>.*mesh 'missing'"):
        mbd.load_model(spec)
