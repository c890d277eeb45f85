"""Height fields (MJCF ``hfield`` geoms) as ground prisms, against MuJoCo C's contacts
(``mj_forward``; nativeccd at ``ccd_tolerance`` 1e-10) on a small synthetic field, and a
brute-force penetration depth where MuJoCo's box contact is not the deepest overlap."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd as mbd
#from jaxmbd._mjcf_hfield import hfield_prisms
from jaxmbd.forces import BodyState

mujoco = pytest.importorskip("mujoco")

ROWS, COLS = 5, 6
HEIGHTS = np.random.default_rng(3).uniform(0.0, 1.0, ROWS * COLS)

# a 5 x 6 field, turned and shifted, and a sphere, a capsule and a box over it
HFIELD_XML = f"""
<mujoco model="hfield">
  <option ccd_tolerance="1e-10" ccd_iterations="500"/>
  <asset>
    <hfield name="terrain" nrow="{ROWS}" ncol="{COLS}" size="1 1.2 .3 .1"
            elevation="{" ".join(f"{h:.6f}" for h in HEIGHTS)}"/>
  </asset>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="terrain" pos=".1 .2 0" euler="0 0 20"/>
    <body name="ball" pos="0 0 1"><freejoint/><geom type="sphere" size=".15"/></body>
    <body name="pill" pos="0 0 2"><freejoint/><geom type="capsule" size=".05 .2"/></body>
    <body name="brick" pos="0 0 3"><freejoint/><geom type="box" size=".1 .08 .06"/></body>
  </worldbody>
</mujoco>
"""


def _mujoco_contacts(m, d, body):
    """[(dist, pos, normal up from the field)] of MuJoCo's contacts of ``body``'s geom."""
    out = []
    for c in d.contact[: d.ncon]:
        geoms = (int(c.geom1), int(c.geom2))
        if m.geom_bodyid[geoms[1]] == body or m.geom_bodyid[geoms[0]] == body:
            sign = 1.0 if m.geom_bodyid[geoms[1]] == body else -1.0
            out.append((float(c.dist), np.array(c.pos), sign * np.array(c.frame[:3])))
    return out


def _penetration(P, B):
    """The penetration depth of two convex point sets: the least overlap along a unit
    direction n, max P.n - min B.n (scipy's Nelder-Mead from 20 starts)."""
    from scipy.optimize import minimize

    def overlap(u):
        n = u / np.linalg.norm(u)
        return (P @ n).max() - (B @ n).min()

    starts = np.random.default_rng(1).normal(size=(20, 3))
    options = dict(xatol=1e-12, fatol=1e-15, maxiter=4000)
    return min(minimize(overlap, x, method="Nelder-Mead", options=options).fun for x in starts)


@pytest.mark.slow  # the brute-force depths: minutes
def test_hfield_contacts_are_mujocos(tmp_path):
    """Each body lowered into the field at 4 random places and attitudes: every prism it
    penetrates gives one contact, as MuJoCo's: the same number; for the sphere and the
    capsule depth to 1e-8, normal to 2e-4 and point to 1e-5 of MuJoCo's (its nativeccd
    accuracy); for the box, whose MuJoCo contacts can be shallower than the overlap (3 mm
    where the box overlaps a prism by 3.9 mm), the depth of each prism's contact equals the
    brute-force penetration depth of the box's corners and the prism's vertices, 1e-8."""
    path = tmp_path / "hfield.xml"
    path.write_text(HFIELD_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mbd.mjcf.UnsupportedFeatureWarning)
        model = mbd.load_model(path, keyframe=None)
    assert sum(j == model.nb for _, j in model.contacts.pairs) == 3  # each body - the field
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    element = model.contacts
    bi, _ = element._slot_bodies()
    slot_shape = element.slot_shapes()[1]  # the field's prism of each slot (ground: body j)
    mujoco.mj_forward(m, d)
    prisms = hfield_prisms(m, d, 0)
    collide = jax.jit(lambda r, A: element.collide(
        BodyState(r, A, jnp.zeros_like(r), jnp.zeros_like(r))))  # fmt: skip
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(4):
        qpos = np.array(m.qpos0)
        for b in range(3):  # each body over its own part of the field, just into it
            a = 7 * b
            qpos[a : a + 2] = [-0.6 + 0.6 * b, rng.uniform(-0.6, 0.6)]
            q = rng.normal(size=4)
            qpos[a + 3 : a + 7] = q / np.linalg.norm(q)
        for b in range(3):  # lowered until its deepest contact is 3 mm
            a = 7 * b
            lo, hi = -0.2, 0.6
            for _ in range(60):
                qpos[a + 2] = 0.5 * (lo + hi)
                d.qpos[:] = qpos
                mujoco.mj_forward(m, d)
                deepest = min([c[0] for c in _mujoco_contacts(m, d, b + 1)], default=1.0)
                lo, hi = (qpos[a + 2], hi) if deepest < -0.003 else (lo, qpos[a + 2])
            qpos[a + 2] = hi
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        r = np.array(d.xipos[1:])
        A = np.array(d.xmat[1:]).reshape(-1, 3, 3)
        gap, point, normal = (np.asarray(x) for x in collide(jnp.asarray(r), jnp.asarray(A)))
        for b in range(3):
            theirs = _mujoco_contacts(m, d, b + 1)
            ours = np.flatnonzero((bi == b) & (gap < 0))
            assert len(ours) == len(theirs) >= 1
            seen += len(theirs)
            if b == 2:  # the box: the brute-force depth of each prism it penetrates
                g = int(m.body_geomadr[3])
                R, size = d.geom_xmat[g].reshape(3, 3), m.geom_size[g]
                signs = np.array(np.meshgrid(*[[-1, 1]] * 3)).reshape(3, -1).T
                corners = (signs * size) @ R.T + d.geom_xpos[g]
                for k in ours:
                    prism = prisms[slot_shape[k]]
                    P = np.asarray(prism.vertices) + np.asarray(prism.pos)
                    assert abs(gap[k] + _penetration(P, corners)) < 1e-8
                continue
            for dist, pos, nrm in theirs:
                k = ours[np.argmin(np.linalg.norm(point[ours] - pos, axis=1))]
                assert abs(gap[k] - dist) < 1e-8
                assert np.abs(normal[k] - nrm).max() < 2e-4
                assert np.abs(point[k] - pos).max() < 1e-5
    assert seen >= 12
