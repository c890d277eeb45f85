"""3-D animation of a Solution: GIF / MP4 (headless matplotlib) and interactive HTML (plotly).

``animate(model, sol, "run.gif")`` draws every body with its visual shapes
(:mod:`jaxmbd.geometry`; when it has none, a stick figure of capsules from its centre of mass
to its joint points, :func:`~jaxmbd.geometry.default_shapes`), the ground attachments as
dark anchors, the joints as markers, optional traces of chosen body points and a time label.
The format follows the suffix:

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

from .geometry import ground_shapes, ground_slides, joint_points, model_shapes
from .model import Model

logger = logging.getLogger("jaxmbd")

FORMATS = (".gif", ".mp4", ".html")
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")  # fmt: skip


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


def _scene(model: Model, sol, *, fps, speed, max_frames, traces, resolution) -> _Scene:
    if tuple(sol.body_names) and tuple(sol.body_names) != tuple(model.body_names):
        raise ValueError(
            f"animate: the solution's bodies {list(sol.body_names)} are not the model's "
            f"{list(model.body_names)}"
        )
    t_all = np.asarray(sol.t)
    r_all, A_all = np.asarray(sol.r), np.asarray(sol.A)
    if r_all.shape[1] != model.nb:
        raise ValueError(f"animate: solution has {r_all.shape[1]} bodies, model {model.nb}")
    if not (np.all(np.isfinite(r_all)) and np.all(np.isfinite(A_all))):
        raise ValueError("animate: the solution contains non-finite positions or rotations")
    idx = _frame_indices(t_all, fps, speed, max_frames)
    r, A = r_all[idx], A_all[idx]
    from matplotlib.colors import to_rgb

    verts, faces, colors = [], [], []
    ground = ground_shapes(model, travel=_travel(model, r_all, A_all))
    for b, shapes in enumerate(model_shapes(model) + ((ground,) if ground else ())):
        vs, fs, cs, offset = [], [], [], 0
        for s in shapes:
            v, f = s.mesh(resolution)
            vs.append(v)
            fs.append(f + offset)
            cs += [s.color or _COLORS[b % len(_COLORS)]] * len(f)
            offset += len(v)
        verts.append(_world(r, A, b, np.concatenate(vs), model.nb))
        faces.append(np.concatenate(fs))
        colors.append(np.array([to_rgb(c) for c in cs]))
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
    """
    if fps <= 0 or speed <= 0 or max_frames < 1:
        raise ValueError("animate: fps, speed and max_frames must be positive")
    scene = _scene(
        model, sol, fps=fps, speed=speed, max_frames=max_frames, traces=traces,
        resolution=resolution,
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
    elev, azim = np.radians(view[0]), np.radians(view[1])
    eye = np.array([np.cos(elev) * np.cos(azim), np.cos(elev) * np.sin(azim), np.sin(elev)])
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
    label = fig.text(0.02, 0.96, "", fontsize=11, va="top")
    if scene.traces:
        ax.legend(handles=lines, loc="upper right", fontsize=8)

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
        label.set_text(f"t = {scene.t[f]:.3f} s")
        return [*polys, label, *lines] + ([marker] if marker is not None else [])

    anim = animation.FuncAnimation(
        fig, draw, frames=len(scene.t), interval=1000.0 / fps, blit=False
    )
    return fig, anim


# ----------------------------------------------------------------------------- HTML


def _write_html(scene: _Scene, path: Path, *, joints, view, size, title, fps) -> Path:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise RuntimeError(
            "animate: the interactive .html export needs plotly: pip install 'jaxmbd[anim]' "
            "(or write .gif / .mp4)"
        ) from None

    def rgb(c):
        return "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(c)))

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
        return out

    n = len(scene.t)
    frames = [
        go.Frame(
            data=body_traces(f),
            name=f"{scene.t[f]:.4f}",
            layout=go.Layout(title=dict(text=f"{title}  t = {scene.t[f]:.3f} s")),
        )
        for f in range(n)
    ]
    duration = 1000.0 / fps
    span = scene.hi - scene.lo
    ratio = span / span.max()
    elev, azim = np.radians(view[0]), np.radians(view[1])
    eye = 2.0 * np.array([np.cos(elev) * np.cos(azim), np.cos(elev) * np.sin(azim), np.sin(elev)])
    fig = go.Figure(
        data=body_traces(0),
        frames=frames,
        layout=go.Layout(
            title=dict(text=f"{title}  t = {scene.t[0]:.3f} s"),
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
