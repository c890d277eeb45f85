"""MuJoCo's contacts as jaxmbd contact pairs: which geom pairs collide, and with what numbers.

**Which pairs.** MuJoCo collides two geoms when (contype1 & conaffinity2) or (contype2 &
conaffinity1) is non-zero, their bodies are not welded together, not parent and child
(unless one is the world, or the ``filterparent`` flag is disabled) and not excluded by a
``<contact><exclude>``; ``<contact><pair>`` adds geom pairs with numbers of their own,
whatever the filters say, and its numbers replace the geoms' (MuJoCo's documentation,
"Computation", section Collision detection: explicit pairs bypass the filters).
:func:`geom_pairs` applies exactly these rules; ``<flag contact="disable"/>`` gives none.
Each geom pair becomes a shape pair of the contact pair of the two jaxmbd bodies that own
the geoms (``ModelBuilder.add_contact(..., shapes=...)``), so that geoms which MuJoCo does
not collide are not checked either.

**Which numbers** (per geom pair, mixed as MuJoCo's ``mj_contactParam``: the geom of higher
``priority`` wins, else ``solmix`` weights solref and solimp, friction and condim take the
maximum; ``<option><flag override>`` replaces them by ``o_solref``, ``o_solimp``,
``o_friction``):

* friction, torsional_friction, rolling_friction: MuJoCo's (sliding, torsional, rolling)
  coefficients (a geom's ``friction``, an explicit pair's friction[0], [2], [3]), each
  the larger of the two geoms' (or the higher ``priority`` geom's); ``condim`` keeps the
  sliding one from 3, the torsional from 4, the rolling from 6 (1: frictionless).
  Torsional and rolling friction follow jaxmbd's elliptic cone
  (:func:`jaxmbd.contact.friction_wrench`, MuJoCo's ``cone="elliptic"``).
* margin: MuJoCo includes a contact in its constraint problem when the distance is below
  ``mjContact.includemargin`` (others in its list are "in gap", ``mjContact.exclude`` = 1,
  and exert no force), and its reference acceleration acts on the violation r = distance
  - includemargin. jaxmbd's law acts on the penetration includemargin - distance (the
  pair's ``margin``): a body rests r_s (MuJoCo's rest penetration) below the height where
  its surfaces are includemargin apart, in both engines (checked on resting balls,
  ``tests/test_contact_params.py``). How includemargin comes from the geoms' margin and
  gap changed between MuJoCo versions: up to 3.x (documentation, XML reference,
  geom/margin and geom/gap) it is max(margins) - max(gaps), and a pair's margin - gap;
  MuJoCo 4.0 adds the two geoms' margins, and gap only widens the band of listed, inactive
  contacts. :func:`margin_rule` asks the installed MuJoCo which rule it follows (one
  two-geom model, once), so that the pairs rest where that MuJoCo rests them.
* stiffness: MuJoCo's contact is a soft constraint whose reference acceleration is
  a_ref = -B v - K d(r) r with impedance d(r) (``solimp``) and, for solref = (timeconst,
  dampratio) > 0, K = 1 / (d_width^2 timeconst^2 dampratio^2) (timeconst at least two time
  steps unless ``refsafe`` is disabled), B = 2 / (d_width timeconst); for solref < 0,
  K = -solref[0] / d_width^2, B = -solref[1] / d_width. The constrained acceleration along
  the normal is d' a_ref + (1 - d') a_0 with d' = d / (d + c (1 - d)), where c = 1 for an
  elliptic cone or condim 1 and c = mu^2 (1 + mu^2) / 2 for MuJoCo's default pyramidal cone
  (:func:`cone_factor`: its edge rows' regulariser). At rest under gravity g the
  penetration r_s therefore solves d'(r_s) K d(r_s) r_s = (1 - d'(r_s)) g, independent of
  the mass (:func:`static_penetration`; checked against MuJoCo's own resting sphere, both
  cones, in ``tests/test_mjcf_contact.py``). jaxmbd's
  Hertz law K_c delta^1.5 then gets the same rest penetration for the pair's reduced mass
  on one contact: K_c = m_eff g / r_s^1.5 (the rule of jaxmbd's default stiffness, with
  MuJoCo's penetration in place of 1e-3 of the shape size).
* restitution: the exit over the entry speed of MuJoCo's contact dynamics without other
  forces, r'' = max(0, d' (-B r' - K d r)), entered at 1 m/s (:func:`restitution`; a
  unilateral spring-damper, so not exp(-pi zeta / sqrt(1 - zeta^2)), which ignores that the
  contact lets go when its force vanishes). MuJoCo's default, solref (0.02, 1) and solimp
  (0.9, 0.95, 0.001, 0.5, 2), gives e = 0.136 (MuJoCo's own ball bounces back at 0.135 of
  its speed), although critically damped.

* slip_velocity: the regularisation of jaxmbd's friction that creeps below the Coulomb
  limit as fast as MuJoCo's soft friction rows do (:func:`slip_velocity`; about 9e-3 m/s at
  MuJoCo's defaults, where jaxmbd's own default is 1e-4 m/s).

Geom pairs of two bodies with equal numbers share one jaxmbd contact pair; those whose
numbers differ (another condim, margin, solref, an explicit pair's own) get a pair of their
own between the same bodies. What has no counterpart is named in the importer's one
warning: geom pairs without a narrow phase (SDFs; meshes collide, as MuJoCo's do, as
the convex hulls of their vertices; height fields as MuJoCo's prisms).
MuJoCo's pyramidal friction cone (its default) is direction dependent; jaxmbd's
regularised Coulomb friction is isotropic (MuJoCo's elliptic cone); the pyramidal normal
softening (:func:`cone_factor`) is that of condim 3's four edges for condim 4 and 6 too.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..contact.narrow_phase import pair_kind
from ..model import GROUND

_MIN_IMPEDANCE, _MAX_IMPEDANCE = 1e-4, 1 - 1e-4  # MuJoCo's mjMINIMP, mjMAXIMP
_MINVAL = 1e-15  # MuJoCo's mjMINVAL
STANDARD_GRAVITY = 9.81


@dataclass(frozen=True)
class GeomPair:
    """One pair of colliding geoms with MuJoCo's mixed contact parameters."""

    geom1: int
    geom2: int
    condim: int
    friction: float  # sliding coefficient
    solref: tuple[float, float]
    solimp: tuple[float, float, float, float, float]
    margin: float
    gap: float
    torsional: float = 0.0  # MuJoCo's friction[1] of the geoms (a pair's friction[2]), m
    rolling: float = 0.0  # MuJoCo's friction[2] of the geoms (a pair's friction[3]), m
    includemargin: float = 0.0  # the distance below which the contact pushes

    @property
    def numbers(self) -> dict:
        """The friction coefficients the pair's ``condim`` keeps (MuJoCo's
        documentation, XML reference, geom/condim): 1 frictionless, 3 sliding, 4 and
        torsional, 6 and rolling; and MuJoCo's includemargin as jaxmbd's margin."""
        return dict(
            friction=self.friction if self.condim >= 3 else 0.0,
            torsional_friction=self.torsional if self.condim >= 4 else 0.0,
            rolling_friction=self.rolling if self.condim >= 6 else 0.0,
            margin=self.includemargin,
        )


def impedance(r: float, solimp) -> float:
    """MuJoCo's impedance d(r) of a constraint violated by ``r`` (``solimp`` = (d0,
    d_width, width, midpoint, power)): d0 at r = 0 rising to d_width at r = width along two
    power-law halves joined at the midpoint; clamped to [1e-4, 1 - 1e-4]."""
    return _impedance_of(solimp)(r)


def _impedance_of(solimp) -> Callable[[float], float]:
    """:func:`impedance` as a function of ``r`` alone (``solimp`` read once: the
    restitution's integration calls it some 10^5 times)."""
    d0, d_width, width, midpoint, power = (float(x) for x in solimp)
    d0, d_width = (min(max(x, _MIN_IMPEDANCE), _MAX_IMPEDANCE) for x in (d0, d_width))

    def d(r: float) -> float:
        x = abs(r) / width if width > _MINVAL else 1.0
        if x >= 1.0 or power == 1.0:
            y = min(x, 1.0)
        elif x <= midpoint:
            y = x**power / midpoint ** (power - 1)
        else:
            y = 1 - (1 - x) ** power / (1 - midpoint) ** (power - 1)
        return d0 + y * (d_width - d0)

    return d


def reference_gains(solref, solimp, *, timestep: float, refsafe: bool) -> tuple[float, float]:
    """MuJoCo's (K, B) of a contact's reference acceleration a_ref = -B v - K d(r) r."""
    d_width = min(max(float(solimp[1]), _MIN_IMPEDANCE), _MAX_IMPEDANCE)
    a, b = (float(x) for x in solref)
    if a > 0:
        timeconst = max(a, 2 * timestep) if refsafe else a
        return 1 / (d_width**2 * timeconst**2 * b**2), 2 / (d_width * timeconst)
    return -a / d_width**2, -b / d_width


def cone_factor(cone: str, condim: int, friction: float) -> float:
    """How much softer MuJoCo's normal direction is with a pyramidal friction cone: its
    four edge rows n +- mu t have the regulariser (1 - d) / d times 2 mu^2 (1 + mu^2) t
    (mj_diagApprox), which carry the normal force together, so the normal row of an
    elliptic cone (or of condim 1) is matched with c = mu^2 (1 + mu^2) / 2 (1 at mu = 1)."""
    if cone == "elliptic" or condim == 1:
        return 1.0
    mu = max(friction, 1e-5)  # MuJoCo's mjMINMU
    return mu * mu * (1 + mu * mu) / 2


def _blend(r: float, solimp, c: float) -> float:
    """The share d' of the reference acceleration in the constrained one, r'' = d' a_ref
    + (1 - d') a_0: d' = d / (d + c (1 - d)) (c: :func:`cone_factor`)."""
    d = impedance(r, solimp)
    return d / (d + c * (1 - d))


def static_penetration(
    solref, solimp, *, gravity: float, timestep: float, refsafe=True, cone_factor=1.0
) -> float:
    """The penetration r_s at which a MuJoCo contact holds a body at rest on it under
    gravity: d'(r_s) K d(r_s) r_s = (1 - d'(r_s)) g (bisection; the module docstring)."""
    K, _ = reference_gains(solref, solimp, timestep=timestep, refsafe=refsafe)
    if not K > 0:
        return math.inf

    def excess(r):
        blend = _blend(r, solimp, cone_factor)
        return blend * K * impedance(r, solimp) * r - (1 - blend) * gravity

    lo, hi = 0.0, 1e-6
    while excess(hi) < 0 and hi < 1e3:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def slip_velocity(
    solref, solimp, *, friction: float, gravity: float, timestep: float, refsafe=True
) -> float:
    """The slip velocity of jaxmbd's regularised friction that creeps as MuJoCo's soft
    friction does. A MuJoCo friction row holds its tangential speed at v = (1 - d) a_t /
    (d B) under a tangential acceleration a_t (its reference acceleration -B v, blended by
    the impedance d); jaxmbd's friction below the Coulomb limit is mu F_n v / v_s, so a
    body resting on one contact creeps at v = v_s a_t / (mu g). Equal creep: v_s = mu g
    (1 - d) / (d B), with d at the rest penetration (about 9e-3 m/s at MuJoCo's defaults;
    elliptic-cone rows). An order-of-magnitude match only: MuJoCo's creep falls with the
    number of contacts sharing the load (a box on four corners creeps 4 times slower), and
    with the pyramidal cone; jaxmbd's does not. At least 1e-4 m/s, jaxmbd's default."""
    _, B = reference_gains(solref, solimp, timestep=timestep, refsafe=refsafe)
    rest = static_penetration(solref, solimp, gravity=gravity, timestep=timestep, refsafe=refsafe)
    d = impedance(rest if math.isfinite(rest) else 0.0, solimp)
    if not B > 0:
        return 1e-4
    return max(1e-4, friction * gravity * (1 - d) / (d * B))


@functools.lru_cache(maxsize=256)
def restitution(
    solref, solimp, *, timestep: float, refsafe=True, cone_factor=1.0, speed=1.0
) -> float:
    """The coefficient of restitution of MuJoCo's contact: the exit over the entry speed
    of r'' = max(0, d'(r) (-B r' - K d(r) r)) (the constraint pushes, never pulls, and lets
    go when its force vanishes), entered at ``speed`` (m/s; the answer depends on it only
    through d(r)), integrated by RK4 with 4000 steps per period 2 pi / (d_width sqrt(K)).
    Checked against MuJoCo's own bounces in ``tests/test_mjcf_contact.py``. Arguments are
    tuples (cached: pairs share them)."""
    K, B = reference_gains(solref, solimp, timestep=timestep, refsafe=refsafe)
    if not K > 0:
        return 0.0
    d_width = impedance(1e9, solimp)
    period = 2 * math.pi / (d_width * math.sqrt(K))
    dt = period / 4000

    impedance_at = _impedance_of(solimp)

    def accel(r, v):  # _blend's d' times the reference acceleration, d(r) evaluated once
        d = impedance_at(r)
        return max(0.0, d / (d + cone_factor * (1 - d)) * (-B * v - K * d * r))

    r, v = 0.0, -speed
    for _ in range(40000):  # ten periods: an overdamped contact creeps out
        k1r, k1v = v, accel(r, v)
        k2r, k2v = v + 0.5 * dt * k1v, accel(r + 0.5 * dt * k1r, v + 0.5 * dt * k1v)
        k3r, k3v = v + 0.5 * dt * k2v, accel(r + 0.5 * dt * k2r, v + 0.5 * dt * k2v)
        k4r, k4v = v + dt * k3v, accel(r + dt * k3r, v + dt * k3v)
        r += dt / 6 * (k1r + 2 * k2r + 2 * k3r + k4r)
        v += dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        if r >= 0 or (v > 0 and accel(r, v) == 0):
            break
    return max(0.0, v / speed)


_MARGIN_PROBE = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="1 1 .1" margin="0.002" gap="0.0005"/>
  <body pos="0 0 0.099"><freejoint/>
    <geom type="sphere" size="0.1" margin="0.01" gap="0.003"/></body>
  <body pos="1 0 0.099"><freejoint/>
    <geom name="paired" type="sphere" size="0.1" contype="0" conaffinity="0"/></body>
</worldbody><contact><pair geom1="paired" geom2="floor" margin="0.004" gap="0.001"/></contact>
</mujoco>"""


@functools.cache
def margin_rule(mujoco) -> tuple[str, bool, bool]:
    """How the installed MuJoCo makes ``mjContact.includemargin``: ("max" or "sum" of the
    geoms' margins (and gaps), whether a geom pair's gap is subtracted, whether an explicit
    pair's gap is), read off the contacts of a two-geom model (the module docstring)."""
    m = mujoco.MjModel.from_xml_string(_MARGIN_PROBE)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    paired = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "paired")
    found = {paired in (c.geom1, c.geom2): float(c.includemargin) for c in d.contact[: d.ncon]}
    geoms = {(0.007, "max", True), (0.0085, "sum", True), (0.01, "max", False),
             (0.012, "sum", False)}  # fmt: skip
    rules = [(mix, gap) for value, mix, gap in geoms if abs(found.get(False, -1) - value) < 1e-12]
    if not rules or abs(found.get(True, -1) - 0.0035) < 1e-12:
        raise RuntimeError(f"MuJoCo {mujoco.__version__}: unknown contact margin rule {found}")
    (mix, subtract), pair_subtract = rules[0], abs(found[True] - 0.003) < 1e-12
    return mix, subtract, pair_subtract


def _mixed(mujoco, m, g1: int, g2: int) -> GeomPair:
    """MuJoCo's mj_contactParam for a dynamic geom pair."""
    mix, subtract, _ = margin_rule(mujoco)
    combine = max if mix == "max" else (lambda a, b: a + b)
    margin = combine(float(m.geom_margin[g1]), float(m.geom_margin[g2]))
    gap = combine(float(m.geom_gap[g1]), float(m.geom_gap[g2]))
    p1, p2 = int(m.geom_priority[g1]), int(m.geom_priority[g2])
    if p1 != p2:
        g = g1 if p1 > p2 else g2
        condim, friction = int(m.geom_condim[g]), np.asarray(m.geom_friction[g], dtype=float)
        solref, solimp = np.asarray(m.geom_solref[g]), np.asarray(m.geom_solimp[g])
    else:
        condim = max(int(m.geom_condim[g1]), int(m.geom_condim[g2]))
        friction = np.maximum(np.asarray(m.geom_friction[g1]), np.asarray(m.geom_friction[g2]))
        s1, s2 = float(m.geom_solmix[g1]), float(m.geom_solmix[g2])
        if s1 >= _MINVAL and s2 >= _MINVAL:
            mix = s1 / (s1 + s2)
        elif s1 < _MINVAL and s2 < _MINVAL:
            mix = 0.5
        else:
            mix = 0.0 if s1 < _MINVAL else 1.0
        r1, r2 = np.asarray(m.geom_solref[g1]), np.asarray(m.geom_solref[g2])
        solref = mix * r1 + (1 - mix) * r2 if r1[0] > 0 and r2[0] > 0 else np.minimum(r1, r2)
        solimp = mix * np.asarray(m.geom_solimp[g1]) + (1 - mix) * np.asarray(m.geom_solimp[g2])
    return GeomPair(
        g1, g2, condim, float(friction[0]), tuple(solref), tuple(solimp), margin, gap,
        torsional=float(friction[1]), rolling=float(friction[2]),
        includemargin=margin - gap if subtract else margin,
    )  # fmt: skip


def _overridden(mujoco, m, pair: GeomPair) -> GeomPair:
    if not m.opt.enableflags & mujoco.mjtEnableBit.mjENBL_OVERRIDE:
        return pair
    friction = np.asarray(m.opt.o_friction, dtype=float)  # MuJoCo's 5: t1, t2, spin, roll
    return GeomPair(
        pair.geom1, pair.geom2, pair.condim, float(friction[0]),
        tuple(m.opt.o_solref), tuple(m.opt.o_solimp), float(m.opt.o_margin), 0.0,
        torsional=float(friction[2]), rolling=float(friction[3]),
        includemargin=float(m.opt.o_margin),
    )  # fmt: skip


def geom_pairs(mujoco, m) -> list[GeomPair]:
    """The geom pairs that MuJoCo collides (module docstring), with their numbers; none
    when contact (or every constraint, the ``constraint`` flag) is disabled."""
    disabled = m.opt.disableflags
    if disabled & (mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT):
        return []
    filter_parent = not disabled & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    weld = np.asarray(m.body_weldid)
    parent = np.asarray(m.body_parentid)
    excluded = set()
    for signature in np.asarray(getattr(m, "exclude_signature", ())):
        b1, b2 = int(signature) >> 16, int(signature) & 0xFFFF
        excluded |= {frozenset((b1, b2)), frozenset((int(weld[b1]), int(weld[b2])))}
    explicit = {}
    for k in range(m.npair):
        g1, g2 = int(m.pair_geom1[k]), int(m.pair_geom2[k])
        friction = np.asarray(m.pair_friction[k], dtype=float)  # t1, t2, spin, roll1, roll2
        margin, gap = float(m.pair_margin[k]), float(m.pair_gap[k])
        explicit[frozenset((g1, g2))] = GeomPair(
            g1, g2, int(m.pair_dim[k]), float(friction[0]), tuple(m.pair_solref[k]),
            tuple(m.pair_solimp[k]), margin, gap,
            torsional=float(friction[2]), rolling=float(friction[3]),
            includemargin=margin - gap if margin_rule(mujoco)[2] else margin,
        )  # fmt: skip
    contype, conaffinity = np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
    body = np.asarray(m.geom_bodyid)
    out = []
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if frozenset((g1, g2)) in explicit:
                continue
            if not (contype[g1] & conaffinity[g2] or contype[g2] & conaffinity[g1]):
                continue
            w1, w2 = int(weld[body[g1]]), int(weld[body[g2]])
            if w1 == w2:
                continue
            parent1, parent2 = int(weld[parent[w1]]), int(weld[parent[w2]])
            if filter_parent and w1 and w2 and (w1 == parent2 or w2 == parent1):
                continue
            if frozenset((int(body[g1]), int(body[g2]))) in excluded:
                continue
            out.append(_overridden(mujoco, m, _mixed(mujoco, m, g1, g2)))
    return out + [_overridden(mujoco, m, pair) for pair in explicit.values()]


def _kinds(mujoco, m, pair: GeomPair) -> str:
    """The pair's geom kinds, "a-b"."""
    names = (mujoco.mjtGeom(int(m.geom_type[g])).name.removeprefix("mjGEOM_").lower()
             for g in (pair.geom1, pair.geom2))  # fmt: skip
    return "-".join(sorted(names))


def add_contacts(mujoco, m, builder, shape_of: dict, mass_of, unsupported: list[str]):
    """Add the contact pairs of MuJoCo's colliding geoms to ``builder``.

    ``shape_of[g]`` = (jaxmbd body or "ground", index in its shape list) of geom g;
    ``mass_of(body)`` its mass (inf for the ground). What cannot be mapped is appended to
    ``unsupported``."""
    gravity = float(np.linalg.norm(m.opt.gravity))
    if not gravity > 0 or m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
        gravity = STANDARD_GRAVITY
    refsafe = not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE
    timestep = float(m.opt.timestep)
    cone = "elliptic" if m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC else "pyramidal"
    groups: dict[tuple, list] = {}  # (body_i, body_j, numbers) -> shape pairs
    orientation: dict[frozenset, tuple[str, str]] = {}  # body_i, body_j of two bodies
    laws: dict[tuple, dict] = {}
    no_narrow_phase = Counter()
    for pair in geom_pairs(mujoco, m):
        if pair.geom1 not in shape_of or pair.geom2 not in shape_of:
            no_narrow_phase[_kinds(mujoco, m, pair)] += 1
            continue
        (b1, k1), (b2, k2) = shape_of[pair.geom1], shape_of[pair.geom2]
        if b1 == b2:
            continue  # one rigid jaxmbd body (merged bodies)
        if b1 == GROUND or orientation.get(frozenset((b1, b2)), (b1, b2)) != (b1, b2):
            (b1, k1), (b2, k2) = (b2, k2), (b1, k1)
        orientation[frozenset((b1, b2))] = (b1, b2)
        k1s, k2s = [k1], [k2]
        shapes_1, shapes_2 = builder._shapes_of(b1), builder._shapes_of(b2)
        kind, _ = pair_kind(shapes_1[k1s[0]].kind, shapes_2[k2s[0]].kind)
        drawn_as = _kinds(mujoco, m, pair) != "-".join(
            sorted((shapes_1[k1s[0]].kind, shapes_2[k2s[0]].kind))
        )
        if kind is None or drawn_as:  # a geom drawn as another kind is not collided as one
            no_narrow_phase[_kinds(mujoco, m, pair)] += 1
            continue
        # many pairs share their parameters: each law's root finding once per parameter set
        key = (tuple(pair.solref), tuple(pair.solimp), pair.condim, pair.friction)
        if key not in laws:
            options = dict(
                timestep=timestep,
                refsafe=refsafe,
                cone_factor=cone_factor(cone, pair.condim, pair.friction),
            )
            laws[key] = dict(
                penetration=static_penetration(pair.solref, pair.solimp, gravity=gravity,
                                               **options),
                restitution=restitution(tuple(pair.solref), tuple(pair.solimp), **options),
                slip_velocity=slip_velocity(
                    pair.solref, pair.solimp, friction=pair.friction, gravity=gravity,
                    timestep=timestep, refsafe=refsafe,
                ),
            )  # fmt: skip
        numbers = {**laws[key], **pair.numbers}
        groups.setdefault((b1, b2, tuple(sorted(numbers.items()))), []).extend(
            (a, b) for a in k1s for b in k2s
        )
    # one contact pair per two bodies and set of numbers: geom pairs whose numbers differ
    # (condim, margin, an explicit <pair>'s own) keep them
    for (b1, b2, numbers), shapes in groups.items():
        numbers = dict(numbers)
        penetration = numbers.pop("penetration")
        m1, m2 = mass_of(b1), mass_of(b2)
        m_eff = m1 if math.isinf(m2) else m1 * m2 / (m1 + m2)
        builder.add_contact(
            b1, b2, shapes=sorted(set(shapes)), **numbers,
            stiffness=m_eff * gravity / penetration**1.5 if math.isfinite(penetration) else None,
        )  # fmt: skip
    if no_narrow_phase:
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted(no_narrow_phase.items()))
        unsupported.append(f"contacts between geoms without a narrow phase in jaxmbd: {kinds}")
