"""3-D animation of a Solution: GIF / MP4 (headless matplotlib) and interactive HTML (plotly).

``animate(model, sol, "run.gif")`` draws every body with its visual shapes
(:mod:`jaxmbd.geometry`; when it has none, a stick figure of capsules from its centre of mass
to its joint points, :func:`~jaxmbd.geometry.default_shapes`), the ground attachments as
dark anchors, the shapes fixed to the ground, the ground planes as checkered patches that
cover the bodies' travel, the joints as markers, optional traces of chosen body points and
a time label. With contact pairs, the active contact slots are drawn as points with their
force arrows (:func:`animate`'s ``contacts``). The format follows the suffix:

* ``.gif``: matplotlib + Pillow (always available);
* ``.mp4``: matplotlib + ffmpeg, from ``PATH`` or the ``imageio-ffmpeg`` package
  (``pip install "jaxmbd[anim]"``); a clear error says so when neither is there;
* ``.html``: one self-contained file (plotly.js inlined, the trajectory embedded), viewable
  offline with no network access (``pip install "jaxmbd[anim]"`` for plotly).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .geometry import (
    Shape,
    ground_shapes,
    ground_slides,
    joint_points,
    model_shapes,
    shape_kind,
)
from .model import Model

logger = logging.getLogger("jaxmbd")

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


def _joint_markers(model: Model) -> tuple[list[str], list[tuple[int, np.ndarray]]]:
    """One marker per joint: its attachment point (:func:`~jaxmbd.geometry.joint_points`) on
    its first moving body, which moves with the drawn body (a ground point may not)."""
    found: dict[str, tuple[int, np.ndarray]] = {}
    for p in joint_points(model):
        if p.joint not in found or found[p.joint][0] == model.nb:
            found[p.joint] = (p.body, p.point)
    return list(found), list(found.values())


def _world(r, A, body: int, local: np.ndarray, nb: int) -> np.ndarray:
    """(T, ..., 3) global positions of body-frame points ``local`` (..., 3)."""
    if body >= nb:  # ground: the point is global
        return np.broadcast_to(local, (len(r),) + local.shape).copy()
    return r[:, body, None, :] + np.einsum("tij,nj->tni", A[:, body], np.atleast_2d(local))


def _travel(model: Model, r, A) -> dict[str, tuple[float, float]]:
    """How far each body sliding on the ground goes along its rail over the whole run."""
    travel = {}
    for slide in ground_slides(model):
        along = (_world(r, A, slide.body, slide.point, model.nb)[:, 0] - slide.origin) @ slide.axis
        travel[slide.joint] = (float(along.min()), float(along.max()))
    return travel


def _resolve_traces(model: Model, traces) -> list[tuple[str, int, np.ndarray]]:
    out = []
    for item in traces or ():
        if isinstance(item, str | int):
            body, point = item, (0.0, 0.0, 0.0)
        else:
            try:
                body, point = item
            except (TypeError, ValueError):
                raise ValueError(
                    f"traces: expected a body name/index or (body, local point), got {item!r}"
                ) from None
        if isinstance(body, str):
            if body not in model.body_names:
                raise ValueError(
                    f"traces: unknown body {body!r}; known bodies: {list(model.body_names)}"
                )
            b = model.body_names.index(body)
        else:
            b = int(body)
            if not 0 <= b < model.nb:
                raise ValueError(f"traces: body index {b} out of range 0..{model.nb - 1}")
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,):
            raise ValueError(f"traces: point of {body!r} must have 3 coordinates, got {point!r}")
        label = "trace " + model.body_names[b]
        label += "" if not p.any() else f" @ {np.round(p, 4).tolist()}"
        out.append((label, b, p))
    return out


def _frame_indices(t: np.ndarray, fps: float, speed: float, max_frames: int) -> np.ndarray:
    span = float(t[-1] - t[0])
    n = int(round(span / speed * fps)) + 1 if span > 0 else 1
    if n > max_frames:
        logger.info("animate: %d frames at %g fps capped to max_frames=%d", n, fps, max_frames)
        n = max_frames
    n = max(1, min(n, len(t)))
    targets = np.linspace(t[0], t[-1], n)
    return np.unique(np.clip(np.searchsorted(t, targets - 1e-12), 0, len(t) - 1))


def _shade(face_normals: np.ndarray, base_rgb: np.ndarray) -> np.ndarray:
    light = np.array([0.3, -0.5, 0.8])
    light /= np.linalg.norm(light)
    lam = np.abs(face_normals @ light)
    return np.clip(base_rgb * (0.45 + 0.55 * lam[:, None]), 0, 1)


def _mesh_entry(shapes, r, A, body: int, nb: int, default_color: str, resolution: int):
    """(verts (F, n, 3), faces (k, 3), colors (k, 3)) of ``shapes`` fixed to ``body``."""
    from matplotlib.colors import to_rgb

    vs, fs, cs, offset = [], [], [], 0
    for s in shapes:
        v, f = s.mesh(resolution)
        vs.append(v)
        fs.append(f + offset)
        cs += [s.color or default_color] * len(f)
        offset += len(v)
    verts = _world(r, A, body, np.concatenate(vs), nb)
    return verts, np.concatenate(fs), np.array([to_rgb(c) for c in cs])


def _plane_patch(plane: Shape, points: np.ndarray, size: float) -> _Patch:
    """The checkered patch drawn for a ground plane: its own ``size`` (lx, ly) centred at
    its point if given, else the rectangle of the plane (in its shape frame) around the
    projections of ``points`` (every drawn body point over the run), extended by
    :data:`PLANE_MARGIN` of the scene's ``size`` on every side."""
    from matplotlib.colors import to_rgb

    R, origin = plane.A, np.asarray(plane.pos)
    own = plane.param("size")
    if own is not None:
        centre, half = np.zeros(2), 0.5 * np.asarray(own, dtype=np.float64)
    else:
        local = ((points - origin) @ R)[:, :2]  # in-plane coordinates of the points
        lo, hi = local.min(0), local.max(0)
        centre, half = 0.5 * (lo + hi), 0.5 * (hi - lo) + PLANE_MARGIN * size
    cell = 2.0 * half.max() / PLANE_CELLS
    n = np.maximum(np.ceil(2.0 * half / cell - 1e-9).astype(int), 1)
    x = np.linspace(-half[0], half[0], n[0] + 1) + centre[0]
    y = np.linspace(-half[1], half[1], n[1] + 1) + centre[1]
    X, Y = np.meshgrid(x, y, indexing="ij")
    local = np.stack([X.ravel(), Y.ravel(), np.zeros(X.size)], axis=1)
    faces, dark = [], []
    for i in range(n[0]):
        for j in range(n[1]):
            a, b = i * (n[1] + 1) + j, (i + 1) * (n[1] + 1) + j
            faces += [(a, b, b + 1), (a, b + 1, a + 1)]
            dark += [(i + j) % 2 == 1] * 2
    base = np.asarray(to_rgb(plane.color or PLANE_COLOR))
    colors = np.where(np.asarray(dark)[:, None], PLANE_CHECKER * base, base)
    return _Patch("ground plane", origin + local @ R.T, np.asarray(faces), colors, R[:, 2])


def _contact_slots(model: Model, sol, contacts):
    """The contact slots to draw (a :class:`~jaxmbd.contact.ContactSlots`, time first) or
    None: the Solution's own (``sol.contact``) unless ``contacts`` is False; with
    ``contacts=True`` and a Solution that carries none (one read from a file), those of the
    model's pairs along its states, as :func:`~jaxmbd.diagnostics.contact_forces` does."""
    if contacts is not None and not isinstance(contacts, bool | np.bool_):
        raise ValueError(f"animate: contacts must be True, False or None, got {contacts!r}")
    if contacts is False:
        return None
    slots = getattr(sol, "contact", None)
    if slots is not None or not contacts:
        return slots
    from .contact import slot_history, with_contact

    element = with_contact(model, "compliant", where="animate").contacts
    if element is None:
        raise ValueError(
            f"animate: contacts=True, but model '{model.name}' has no contact pairs "
            "(add_contact / add_contacts)"
        )
    return slot_history(element, sol.r, sol.A, sol.rdot, sol.omega)


def _contact_arrows(slots, idx: np.ndarray, size: float, force_scale) -> _Contacts:
    """The slots at the frames ``idx`` with their force arrows: ``force_scale`` (length per
    unit force) times the force, or, without it, scaled so that the largest slot force
    over all saved steps is :data:`FORCE_ARROW_FRACTION` of ``size`` long. Arrows longer
    than :data:`ARROW_CUT` of ``size`` are cut to that length (and drawn without a head)."""
    normal_force = np.asarray(slots.normal_force)
    force = normal_force[..., None] * np.asarray(slots.normal)
    force = force + np.asarray(slots.tangential_force)
    point, active = np.asarray(slots.point), np.asarray(slots.active)
    if force.ndim != 3 or len(force) != len(active):
        raise ValueError(
            f"animate: the contact slots have shape {force.shape}; expected (steps, slots, 3) "
            "(a batch of runs is animated one member at a time)"
        )
    if not (np.all(np.isfinite(force)) and np.all(np.isfinite(point[active]))):
        raise ValueError("animate: the contact slots hold non-finite forces or points")
    magnitude = np.linalg.norm(np.where(active[..., None], force, 0.0), axis=-1)
    largest = float(magnitude.max(initial=0.0))
    if force_scale is not None:
        scale = float(force_scale)
    else:
        scale = FORCE_ARROW_FRACTION * size / largest if largest > 0 else 0.0
    arrow = scale * np.where(active[idx][..., None], force[idx], 0.0)
    length = np.linalg.norm(arrow, axis=-1)
    cut = length > ARROW_CUT * size
    arrow = np.where(
        cut[..., None], arrow * (ARROW_CUT * size / np.maximum(length, 1e-300))[..., None], arrow
    )
    return _Contacts(
        point=point[idx], arrow=arrow, active=active[idx], cut=cut, scale=scale, largest=largest
    )


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


def _scene(
    model: Model, sol, *, fps, speed, max_frames, traces, resolution, contacts=None,
    force_scale=None,
) -> _Scene:  # fmt: skip
    if tuple(sol.body_names) and tuple(sol.body_names) != tuple(model.body_names):
        raise ValueError(
            f"animate: the solution's bodies {list(sol.body_names)} are not the model's "
            f"{list(model.body_names)}"
        )
    t_all = np.asarray(sol.t)
    r_all, A_all = np.asarray(sol.r), np.asarray(sol.A)
    if r_all.ndim != 3 or r_all.shape[1] != model.nb:
        raise ValueError(
            f"animate: solution positions have shape {r_all.shape}, expected (steps, "
            f"{model.nb}, 3) for the model's {model.nb} bodies (a batch is animated one "
            "member at a time)"
        )
    if not (np.all(np.isfinite(r_all)) and np.all(np.isfinite(A_all))):
        raise ValueError("animate: the solution contains non-finite positions or rotations")
    slots = _contact_slots(model, sol, contacts)
    idx = _frame_indices(t_all, fps, speed, max_frames)
    r, A = r_all[idx], A_all[idx]

    verts, faces, colors = [], [], []
    for b, shapes in enumerate(model_shapes(model)):
        entry = _mesh_entry(shapes, r, A, b, model.nb, _COLORS[b % len(_COLORS)], resolution)
        for out, x in zip((verts, faces, colors), entry, strict=True):
            out.append(x)
    fixed = tuple(getattr(model, "ground_shapes", ()) or ())
    planes = [s for s in fixed if shape_kind(s.kind).ground_only]
    ground = ground_shapes(model, travel=_travel(model, r_all, A_all))
    ground += tuple(s for s in fixed if not shape_kind(s.kind).ground_only)
    if ground:
        entry = _mesh_entry(ground, r, A, model.nb, model.nb, GROUND_SHAPE_COLOR, resolution)
        for out, x in zip((verts, faces, colors), entry, strict=True):
            out.append(x)
    joint_names, points = _joint_markers(model)
    joints = (
        np.stack([_world(r, A, b, p, model.nb)[:, 0] for b, p in points], axis=1)
        if points
        else np.zeros((len(idx), 0, 3))
    )
    trace_list = [
        (label, _world(r_all, A_all, b, p, model.nb)[:, 0])
        for label, b, p in _resolve_traces(model, traces)
    ]
    pts = np.concatenate(
        [v.reshape(-1, 3) for v in verts] + [joints.reshape(-1, 3)] + [tr for _, tr in trace_list]
    )
    size = max(float(np.ptp(pts, axis=0).max()), 1e-9)
    patches = [_plane_patch(s, pts, size) for s in planes]
    drawn = _contact_arrows(slots, idx, size, force_scale) if slots is not None else None
    extra = [p.verts for p in patches]
    if drawn is not None:
        extra += [drawn.point[drawn.active], (drawn.point + drawn.arrow)[drawn.active]]
    pts = np.concatenate([pts, *extra])
    lo, hi = pts.min(0), pts.max(0)
    # a flat mechanism keeps a readable depth: every axis spans >= 25 % of the largest
    span = max(float((hi - lo).max()), 1e-9)
    mid, half = 0.5 * (lo + hi), 0.5 * np.maximum(hi - lo, 0.25 * span)
    lo, hi = mid - half, mid + half
    pad = 0.05 * span
    return _Scene(
        t=t_all[idx],
        r=r,
        verts=verts,
        faces=faces,
        colors=colors,
        names=model.body_names + (("ground",) if ground else ()),
        nb=model.nb,
        joint_names=joint_names,
        joints=joints,
        traces=trace_list,
        trace_upto=idx,
        lo=lo - pad,
        hi=hi + pad,
        size=size,
        planes=patches,
        contacts=drawn,
        automatic_scale=force_scale is None,
    )


def animate(
    model: Model,
    sol,
    path=None,
    *,
    fps: float = 25.0,
    speed: float = 1.0,
    max_frames: int = 250,
    traces=None,
    joints: bool = True,
    contacts: bool | None = None,
    force_scale: float | None = None,
    view: tuple[float, float] = (25.0, -60.0),
    size: tuple[int, int] = (640, 480),
    title: str | None = None,
    resolution: int = 16,
):
    """Animate ``sol`` (any Solution of ``model``); write ``path`` (.gif, .mp4 or .html).

    ``speed``: simulated seconds per second of playback; frames are taken from the saved
    steps at ``fps`` (at most ``max_frames``, evenly spread). ``traces``: body names or
    indices (their centre of mass) or ``(body, local point)`` pairs, drawn as the path so
    far. ``view``: (elevation, azimuth) in degrees; ``size``: pixels. Without ``path``,
    returns the matplotlib animation (for a notebook: ``anim.to_jshtml()``). Returns the
    path written otherwise.

    Ground planes (:meth:`~jaxmbd.ModelBuilder.add_ground_plane`) are drawn as checkered
    patches: their own ``size`` if given, else covering the bodies' travel over the run
    projected on the plane, :data:`PLANE_MARGIN` (1/4) of the scene's size to spare on
    every side. The scene's size is the largest edge of the box around every drawn body,
    joint marker and trace over the run.

    ``contacts``: draw the contact slots (:attr:`~jaxmbd.Solution.contact`). None (the
    default): when the Solution has them (a run of a model with contact pairs); False:
    never; True: always, from the model's pairs along the Solution's states where it
    carries none (a Solution read from a file; as
    :func:`~jaxmbd.diagnostics.contact_forces`). At each frame every active slot (gap < 0)
    is a point at its contact point and an arrow from there along its force on the pair's
    body_i (the body, not the ground), normal plus tangential, F_n n + F_t. Arrows are
    in proportion to the force: the largest slot force over all saved steps, F_max, is
    drawn :data:`FORCE_ARROW_FRACTION` (1/4) of the scene's size long, i.e. an arrow is
    |F| / F_max * size / 4 long. ``force_scale`` (length per unit force, e.g. 0.01 m/N)
    sets the scale instead (to show small resting forces next to impacts, or to compare
    runs); arrows then longer than :data:`ARROW_CUT` (1/2) of the scene's size are cut to
    that length and drawn without a head. The legend states the force that a quarter of
    the scene's size stands for.
    """
    if fps <= 0 or speed <= 0 or max_frames < 1:
        raise ValueError("animate: fps, speed and max_frames must be positive")
    if force_scale is not None and not (
        isinstance(force_scale, int | float | np.floating | np.integer)
        and not isinstance(force_scale, bool)
        and np.isfinite(force_scale)
        and force_scale > 0
    ):
        raise ValueError(
            f"animate: force_scale must be a positive length per unit force, got {force_scale!r}"
        )
    scene = _scene(
        model, sol, fps=fps, speed=speed, max_frames=max_frames, traces=traces,
        resolution=resolution, contacts=contacts, force_scale=force_scale,
    )  # fmt: skip
    title = title or model.name
    if path is None:
        return _matplotlib_animation(scene, joints, view, size, title, fps)[1]
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"animate: unknown output format {path.suffix!r}; use {list(FORMATS)}")
    if suffix == ".html":
        return _write_html(scene, path, joints=joints, view=view, size=size, title=title, fps=fps)
    writer = _writer(suffix, fps)
    fig, anim = _matplotlib_animation(scene, joints, view, size, title, fps)
    import matplotlib.pyplot as plt

    try:
        anim.save(str(path), writer=writer, dpi=100)
    finally:
        plt.close(fig)
    return path


def _force_legend(scene: _Scene) -> str:
    """The arrows' scale: the force drawn a quarter of the scene's size long (the largest
    force over the run when the scale is automatic)."""
    contacts, automatic = scene.contacts, scene.automatic_scale
    length = FORCE_ARROW_FRACTION * scene.size
    if contacts.scale == 0.0:
        return "contact points (no force)"
    force = contacts.largest if automatic else length / contacts.scale
    return f"contact forces: {force:.3g} N drawn {length:.3g} m" + (" (max)" if automatic else "")


# ----------------------------------------------------------------------------- matplotlib


def _writer(suffix: str, fps: float):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import animation

    if suffix == ".gif":
        return animation.PillowWriter(fps=fps)
    exe = shutil.which(matplotlib.rcParams["animation.ffmpeg_path"]) or shutil.which("ffmpeg")
    if exe is None:
        try:
            import imageio_ffmpeg

            exe = imageio_ffmpeg.get_ffmpeg_exe()
        except (ImportError, RuntimeError):
            exe = None
    if exe is None:
        raise RuntimeError(
            "animate: writing .mp4 needs ffmpeg, and none was found (not on PATH, and the "
            "imageio-ffmpeg package is not installed). Install one of them (pip install "
            "'jaxmbd[anim]' or apt-get install ffmpeg), or write .gif or .html instead."
        )
    matplotlib.rcParams["animation.ffmpeg_path"] = exe
    return animation.FFMpegWriter(fps=fps, codec="libx264", extra_args=["-pix_fmt", "yuv420p"])


def _normals(tri: np.ndarray) -> np.ndarray:
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)


def _matplotlib_animation(scene: _Scene, joints: bool, view, size, title, fps):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import animation
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    fig = plt.figure(figsize=(size[0] / 100, size[1] / 100), dpi=100)
    ax = fig.add_subplot(projection="3d")
    # bodies are depth-sorted per frame (painter's algorithm by body); markers and traces
    # are drawn on top so that they stay visible
    ax.computed_zorder = False
    eye = _eye(view)
    ax.view_init(elev=view[0], azim=view[1])
    ax.set_xlim(scene.lo[0], scene.hi[0])
    ax.set_ylim(scene.lo[1], scene.hi[1])
    ax.set_zlim(scene.lo[2], scene.hi[2])
    ax.set_box_aspect(
        np.maximum(scene.hi - scene.lo, 1e-3 * (scene.hi - scene.lo).max()), zoom=1.15
    )
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    ax.set_title(title)
    for patch in scene.planes:  # below every body: drawn first
        coll = Poly3DCollection(
            list(patch.verts[patch.faces]), linewidths=0, label=patch.name, zorder=0.5
        )
        coll.set_facecolor(_shade(np.broadcast_to(patch.normal, (len(patch.faces), 3)),
                                  patch.colors))  # fmt: skip
        ax.add_collection3d(coll)
    polys = []
    for b in range(len(scene.names)):
        coll = Poly3DCollection(
            [], linewidths=0.2, edgecolors=(0, 0, 0, 0.15), label=scene.names[b]
        )
        ax.add_collection3d(coll)
        polys.append(coll)
    marker = (
        ax.plot([], [], [], "o", ms=5, mfc="white", mec="black", mew=1.2, zorder=1e4)[0]
        if joints and scene.joints.shape[1]
        else None
    )
    lines = [
        ax.plot([], [], [], "-", lw=1.5, label=label, zorder=1e4 - 1)[0]
        for label, _ in scene.traces
    ]
    contact = scene.contacts
    if contact is not None:
        spots = ax.plot([], [], [], "o", ms=4, color=CONTACT_COLOR, zorder=1e4 + 2)[0]
        arrows = ax.plot([], [], [], "-", lw=1.8, color=CONTACT_COLOR, zorder=1e4 + 1,
                         label=_force_legend(scene))[0]  # fmt: skip
    label = fig.text(0.02, 0.96, "", fontsize=11, va="top")
    handles = lines + ([arrows] if contact is not None else [])
    if handles:
        ax.legend(handles=handles, loc="upper right", fontsize=8)

    def draw(f):
        depth = [scene.verts[b][f].mean(axis=0) @ eye for b in range(len(polys))]
        for rank, b in enumerate(np.argsort(depth)):
            polys[b].set_zorder(1 + rank)
        for b, coll in enumerate(polys):
            tri = scene.verts[b][f][scene.faces[b]]
            coll.set_verts(list(tri))
            coll.set_facecolor(_shade(_normals(tri), scene.colors[b]))
        if marker is not None:
            p = scene.joints[f]
            marker.set_data_3d(p[:, 0], p[:, 1], p[:, 2])
        for line, (_, tr) in zip(lines, scene.traces, strict=True):
            seg = tr[: scene.trace_upto[f] + 1]
            line.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
        if contact is not None:
            on = contact.active[f]
            p = contact.point[f][on]
            spots.set_data_3d(p[:, 0], p[:, 1], p[:, 2])
            seg = _arrow_polyline(p, contact.arrow[f][on], eye, contact.cut[f][on])
            arrows.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
        label.set_text(f"t = {scene.t[f]:.3f} s")
        artists = [*polys, label, *lines] + ([marker] if marker is not None else [])
        return artists + ([spots, arrows] if contact is not None else [])

    anim = animation.FuncAnimation(
        fig, draw, frames=len(scene.t), interval=1000.0 / fps, blit=False
    )
    return fig, anim


# ----------------------------------------------------------------------------- HTML


def _write_html(scene: _Scene, path: Path, *, joints, view, size, title, fps) -> Path:
    fig = _plotly_figure(scene, joints=joints, view=view, size=size, title=title, fps=fps)
    html = fig.to_html(include_plotlyjs=True, full_html=True, auto_play=False)
    trajectory = {
        "t": scene.t.tolist(),
        "bodies": list(scene.names[: scene.nb]),
        "joints": scene.joint_names,
        "r": scene.r.tolist(),  # (frames, bodies, 3) centres of mass
    }
    block = (
        '<script type="application/json" id="jaxmbd-trajectory">'
        + json.dumps(trajectory).replace("</", "<\\/")
        + "</script>\n"
    )
    html = html.replace("</body>", block + "</body>", 1)
    path.write_text(html, encoding="utf-8")
    return path


def _gaps(x: np.ndarray) -> list:
    """A coordinate column for plotly, NaN (a break in a line) as None."""
    return [None if np.isnan(v) else float(v) for v in x]


def _plotly_figure(scene: _Scene, *, joints, view, size, title, fps):
    """The plotly figure: moving traces first (updated by every frame), then the static
    ground planes."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise RuntimeError(
            "animate: the interactive .html export needs plotly: pip install 'jaxmbd[anim]' "
            "(or write .gif / .mp4)"
        ) from None

    def rgb(c):
        return "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(c)))

    # WebGL hides lines inside a mesh: with contacts the bodies are see-through, so that
    # the arrows into them (the force on the body) show
    opacity = 1.0 if scene.contacts is None else BODY_OPACITY_WITH_CONTACTS

    def body_traces(f):
        out = []
        for b, name in enumerate(scene.names):
            v, F = scene.verts[b][f], scene.faces[b]
            out.append(
                go.Mesh3d(
                    x=v[:, 0].tolist(),
                    y=v[:, 1].tolist(),
                    z=v[:, 2].tolist(),
                    i=F[:, 0].tolist(),
                    j=F[:, 1].tolist(),
                    k=F[:, 2].tolist(),
                    facecolor=[rgb(c) for c in scene.colors[b]],
                    flatshading=True,
                    lighting=dict(ambient=0.5, diffuse=0.7, specular=0.1),
                    opacity=opacity,
                    name=name,
                    showlegend=True,
                    hovertext=name,
                    hoverinfo="text",
                )
            )
        if joints and scene.joints.shape[1]:
            p = scene.joints[f]
            out.append(
                go.Scatter3d(
                    x=p[:, 0].tolist(), y=p[:, 1].tolist(), z=p[:, 2].tolist(), mode="markers",
                    marker=dict(size=5, color="white", line=dict(color="black", width=2)),
                    name="joints", text=scene.joint_names, hoverinfo="text",
                )
            )  # fmt: skip
        for label, tr in scene.traces:
            seg = tr[: scene.trace_upto[f] + 1]
            out.append(
                go.Scatter3d(
                    x=seg[:, 0].tolist(), y=seg[:, 1].tolist(), z=seg[:, 2].tolist(),
                    mode="lines", line=dict(width=4), name=label,
                )
            )  # fmt: skip
        contact = scene.contacts
        if contact is not None:
            on = contact.active[f]
            p = contact.point[f][on]
            seg = _arrow_polyline(p, contact.arrow[f][on], eye / 2.0, contact.cut[f][on])
            out.append(
                go.Scatter3d(
                    x=p[:, 0].tolist(), y=p[:, 1].tolist(), z=p[:, 2].tolist(), mode="markers",
                    marker=dict(size=3, color=CONTACT_COLOR), name="contact points",
                )
            )  # fmt: skip
            out.append(
                go.Scatter3d(
                    x=_gaps(seg[:, 0]), y=_gaps(seg[:, 1]), z=_gaps(seg[:, 2]), mode="lines",
                    line=dict(width=5, color=CONTACT_COLOR), name=_force_legend(scene),
                )
            )  # fmt: skip
        return out

    planes = [
        go.Mesh3d(
            x=patch.verts[:, 0].tolist(), y=patch.verts[:, 1].tolist(),
            z=patch.verts[:, 2].tolist(), i=patch.faces[:, 0].tolist(),
            j=patch.faces[:, 1].tolist(), k=patch.faces[:, 2].tolist(),
            facecolor=[rgb(c) for c in patch.colors], flatshading=True,
            lighting=dict(ambient=0.8, diffuse=0.3, specular=0.0), name=patch.name,
            showlegend=True, hoverinfo="skip",
        )
        for patch in scene.planes
    ]  # fmt: skip

    def heading(f):  # the arrows' scale under the time: empty traces have no legend entry
        text = f"{title}  t = {scene.t[f]:.3f} s"
        if scene.contacts is not None:
            text += f"<br><sub>{_force_legend(scene)}</sub>"
        return text

    eye = 2.0 * _eye(view)
    n = len(scene.t)
    moving = len(body_traces(0))
    frames = [
        go.Frame(
            data=body_traces(f),
            traces=list(range(moving)),
            name=f"{scene.t[f]:.4f}",
            layout=go.Layout(title=dict(text=heading(f))),
        )
        for f in range(n)
    ]
    duration = 1000.0 / fps
    span = scene.hi - scene.lo
    ratio = span / span.max()
    fig = go.Figure(
        data=body_traces(0) + planes,
        frames=frames,
        layout=go.Layout(
            title=dict(text=heading(0)),
            width=size[0],
            height=size[1],
            scene=dict(
                xaxis=dict(range=[scene.lo[0], scene.hi[0]], autorange=False),
                yaxis=dict(range=[scene.lo[1], scene.hi[1]], autorange=False),
                zaxis=dict(range=[scene.lo[2], scene.hi[2]], autorange=False),
                aspectmode="manual",
                aspectratio=dict(x=ratio[0], y=ratio[1], z=ratio[2]),
                camera=dict(eye=dict(x=eye[0], y=eye[1], z=eye[2])),
            ),
            updatemenus=[
                dict(
                    type="buttons",
                    showactive=False,
                    direction="left",
                    x=0.1,
                    y=0,
                    xanchor="right",
                    yanchor="top",
                    pad=dict(r=10, t=60),
                    buttons=[
                        dict(
                            label="Play",
                            method="animate",
                            args=[
                                None,
                                dict(
                                    frame=dict(duration=duration, redraw=True),
                                    transition=dict(duration=0),
                                    fromcurrent=True,
                                ),
                            ],
                        ),
                        dict(
                            label="Pause",
                            method="animate",
                            args=[[None], dict(frame=dict(duration=0), mode="immediate")],
                        ),
                    ],
                )
            ],
            sliders=[
                dict(
                    x=0.1,
                    y=0,
                    len=0.9,
                    xanchor="left",
                    yanchor="top",
                    pad=dict(b=10, t=30),
                    currentvalue=dict(prefix="t = ", suffix=" s"),
                    steps=[
                        dict(
                            label=f"{scene.t[f]:.3f}",
                            method="animate",
                            args=[
                                [f"{scene.t[f]:.4f}"],
                                dict(frame=dict(duration=0, redraw=True), mode="immediate"),
                            ],
                        )
                        for f in range(n)
                    ],
                )
            ],
        ),
    )
    return fig
