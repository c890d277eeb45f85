"""The interactive HTML writer of :func:`jaxmbd.viz.animation.animate`: one self-contained file
(plotly.js inlined, the trajectory embedded), viewable offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ._scene import (
    BODY_OPACITY_WITH_CONTACTS,
    CONTACT_COLOR,
    _arrow_polyline,
    _eye,
    _force_legend,
    _Scene,
)


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
