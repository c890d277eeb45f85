"""The drawing data of an animation (:mod:`jaxmbd.viz.animation`): the scene precomputed in
numpy, its colours and sizes, and the helpers that both writers (matplotlib, plotly) share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FORMATS = (".gif", ".mp4", ".html")
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")  # fmt: skip
GROUND_SHAPE_COLOR = "#9a9a9a"  # shapes fixed to the ground without their own colour
PLANE_COLOR = "#d6d6d6"  # the light squares of a ground plane's checkered patch
PLANE_CHECKER = 0.86  # the dark squares: the light colour times this
PLANE_CELLS = 10  # squares along the longer side of a plane's patch
#: A plane's patch reaches this fraction of the scene's size beyond the bodies' travel.
PLANE_MARGIN = 0.25
#: The largest contact force of the run is drawn this fraction of the scene's size long.
FORCE_ARROW_FRACTION = 0.25
#: Arrows (with a given ``force_scale``) are cut to this fraction of the scene's size.
ARROW_CUT = 0.5
CONTACT_COLOR = "#e8000b"  # contact points and force arrows
ARROW_HEAD = 0.25  # barb length over arrow length
ARROW_HEAD_ANGLE = np.radians(25.0)  # barb angle to the shaft
BODY_OPACITY_WITH_CONTACTS = 0.6  # HTML: bodies see-through when contact arrows are drawn


@dataclass
class _Scene:
    """Everything needed to draw a frame, precomputed in numpy."""

    t: np.ndarray  # (F,) frame times
    r: np.ndarray  # (F, nb, 3) centres of mass at the frames
    verts: list[np.ndarray]  # per body, then the ground (anchors, rails) if drawn: (F, n, 3)
    faces: list[np.ndarray]  # per entry of verts: (k, 3)
    colors: list[np.ndarray]  # per entry of verts: (k, 3) RGB, one per face
    names: tuple[str, ...]  # per entry of verts: the bodies' names, then "ground"
    nb: int  # the number of bodies (the first nb entries of verts)
    joint_names: list[str]
    joints: np.ndarray  # (F, nj, 3)
    traces: list[tuple[str, np.ndarray]]  # label, (F_all, 3) over all saved steps up to frame
    trace_upto: np.ndarray  # (F,) index into the trace arrays of each frame
    lo: np.ndarray
    hi: np.ndarray
    size: float  # the scene's size: largest edge of the box around the bodies over the run
    planes: list[_Patch]  # the ground planes' patches (static)
    contacts: _Contacts | None  # the contact slots at the frames, None when not drawn
    automatic_scale: bool = True  # the arrows' scale from the largest force (no force_scale)


@dataclass
class _Patch:
    """A static triangle mesh in global coordinates (a ground plane's checkered patch)."""

    name: str
    verts: np.ndarray  # (n, 3)
    faces: np.ndarray  # (k, 3)
    colors: np.ndarray  # (k, 3) RGB
    normal: np.ndarray  # (3,) unit normal of the plane


@dataclass
class _Contacts:
    """The contact slots at the frames: every slot's point, its force arrow (the force on
    the pair's body_i, normal plus tangential, times ``scale``) and whether it is active."""

    point: np.ndarray  # (F, ns, 3)
    arrow: np.ndarray  # (F, ns, 3) scale * (F_n n + F_t)
    active: np.ndarray  # (F, ns) bool: gap < 0
    cut: np.ndarray  # (F, ns) bool: the arrow is cut to ARROW_CUT of the scene's size
    scale: float  # arrow length per unit force (m/N)
    largest: float  # the largest slot force over the run (N)


def _arrow_polyline(
    start: np.ndarray, arrow: np.ndarray, eye: np.ndarray, cut: np.ndarray | None = None
) -> np.ndarray:
    """Arrows as one polyline, NaN rows between the pieces: per arrow its shaft from
    ``start`` to ``start + arrow`` and two barbs :data:`ARROW_HEAD` of its length long at
    :data:`ARROW_HEAD_ANGLE` to it, in the plane of the arrow and the direction ``eye``
    towards the camera (so that the head shows). ``start``, ``arrow``: (k, 3); ``cut``
    (k,): arrows drawn without a head (cut to length); zero arrows give nothing."""
    out = []
    gap = np.full((1, 3), np.nan)
    cut = np.zeros(len(start), bool) if cut is None else cut
    for p, a, headless in zip(start, arrow, cut, strict=True):
        length = float(np.linalg.norm(a))
        if length == 0.0:
            continue
        out += [np.stack([p, p + a]), gap]
        if headless:
            continue
        d = a / length
        side = np.cross(d, eye)
        if np.linalg.norm(side) < 1e-6:  # arrow along the line of sight: any side
            side = np.cross(d, np.eye(3)[np.argmin(np.abs(d))])
        side /= np.linalg.norm(side)
        tip, head = p + a, ARROW_HEAD * length
        back = -np.cos(ARROW_HEAD_ANGLE) * d
        barbs = [tip + head * (back + sign * np.sin(ARROW_HEAD_ANGLE) * side) for sign in (1, -1)]
        out += [np.stack([barbs[0], tip, barbs[1]]), gap]
    return np.concatenate(out) if out else np.zeros((0, 3))


def _eye(view) -> np.ndarray:
    """Unit vector from the scene towards the camera at (elevation, azimuth) in degrees."""
    elev, azim = np.radians(view[0]), np.radians(view[1])
    return np.array([np.cos(elev) * np.cos(azim), np.cos(elev) * np.sin(azim), np.sin(elev)])


def _force_legend(scene: _Scene) -> str:
    """The arrows' scale: the force drawn a quarter of the scene's size long (the largest
    force over the run when the scale is automatic)."""
    contacts, automatic = scene.contacts, scene.automatic_scale
    length = FORCE_ARROW_FRACTION * scene.size
    if contacts.scale == 0.0:
        return "contact points (no force)"
    force = contacts.largest if automatic else length / contacts.scale
    return f"contact forces: {force:.3g} N drawn {length:.3g} m" + (" (max)" if automatic else "")
