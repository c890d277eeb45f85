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

import logging
import shutil
from pathlib import Path

import numpy as np

from ..contact import slot_history, with_contact
from ..geometry import (
    Shape,
    ground_shapes,
    ground_slides,
    joint_points,
    model_shapes,
    shape_kind,
)
from ..model import Model
from ._animation_html import _write_html
from ._scene import (
    _COLORS,
    ARROW_CUT,
    CONTACT_COLOR,
    FORCE_ARROW_FRACTION,
    FORMATS,
    GROUND_SHAPE_COLOR,
    PLANE_CELLS,
    PLANE_CHECKER,
    PLANE_COLOR,
    PLANE_MARGIN,
    _arrow_polyline,
    _Contacts,
    _eye,
    _force_legend,
    _Patch,
    _Scene,
)

logger = logging.getLogger("jaxmbd")


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
    model's pairs along its states, as :func:`~jaxmbd.analysis.diagnostics.contact_forces` does."""
    if contacts is not None and not isinstance(contacts, bool | np.bool_):
        raise ValueError(f"animate: contacts must be True, False or None, got {contacts!r}")
    if contacts is False:
        return None
    slots = getattr(sol, "contact", None)
    if slots is not None or not contacts:
        return slots
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
    :func:`~jaxmbd.analysis.diagnostics.contact_forces`). At each frame every active slot (gap < 0)
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
