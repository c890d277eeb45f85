"""A builder check: a joint whose point lies far from both of its bodies is most likely a
typo (a point in the wrong units or frame), so the model warns (issue: a joint point 10 m
from both bodies of a 1 m mechanism was accepted silently)."""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import AssemblyWarning

GROUND = "ground"


def warn_far_joint_points(model_name: str, bodies, joints) -> None:
    """Warn (:class:`~jaxmbd.AssemblyWarning`) for each joint whose point, at the drawn
    pose, is farther from the centres of both of its bodies than the model's size: the
    largest distance between any two body centres and the origin (the ground's frame),
    at least 0.1 m. A joint to the ground counts only its moving body's distance.
    ``bodies``: the builder's body specs (name, r, A); ``joints``: its joint specs
    (name, body_i, body_j, s_bar_i)."""
    if not bodies or not joints:
        return
    centres = {b.name: np.asarray(b.r, dtype=float) for b in bodies}
    frames = {b.name: (np.asarray(b.r, dtype=float), np.asarray(b.A, dtype=float)) for b in bodies}
    points = np.vstack([np.zeros(3), *centres.values()])
    size = max(float(np.max(np.linalg.norm(points[:, None] - points[None], axis=-1))), 0.1)
    far = []
    for j in joints:
        r_i, A_i = frames.get(j.body_i, (np.zeros(3), np.eye(3)))
        point = r_i + A_i @ np.asarray(j.s_bar_i, dtype=float)
        distances = [np.linalg.norm(point - centres[b]) for b in (j.body_i, j.body_j)
                     if b != GROUND]  # fmt: skip
        if distances and min(distances) > size:
            far.append(f"'{j.name}' ({min(distances):.3g} m from the nearer of "
                       f"'{j.body_i}', '{j.body_j}')")  # fmt: skip
    if far:
        warnings.warn(
            f"model '{model_name}': joint point farther from both of its bodies than the "
            f"model's size ({size:.3g} m): " + "; ".join(far) + ". Points are global, at "
            "the drawn pose; a typo here makes the start assemble the model by moving "
            "bodies far.",
            AssemblyWarning,
            stacklevel=3,
        )
