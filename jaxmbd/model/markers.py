"""Markers: named frames fixed on bodies, read from a run as ``sol.markers[name]``.

A marker is model data (:meth:`~jaxmbd.ModelBuilder.add_marker`, MJCF ``<site>``, a model
file's ``markers``): a body, a point ``s`` on it (body frame, from the centre of mass, which
is the body frame's origin) and axes ``F`` (3x3, the marker's x, y, z as columns in body
coordinates). The builder takes the point and axes global, at the initial configuration
(as drawn, like joint points), and stores them in the body frame. A marker is also the
**site** of a body sensor (``add_sensor(..., marker=name)``, :mod:`jaxmbd.sensors`).

Its motion is a function of the body's state, evaluated from the Solution when read (no
extra solve, exact at every saved step, vectorised over steps and batch members, and
differentiable: a loss on ``sol.markers["tip"].position`` has gradients). With the body's
position r, rotation A, velocity r_dot, body-frame angular velocity omega and their
derivatives r_ddot, omegadot (paper 1's rA state; every formulation's Solution carries it):

=========================== =========== ==================================================
``MarkerMotion`` field      shape       value
=========================== =========== ==================================================
``position``                (..., T, 3) p = r + A s (global)
``velocity``                (..., T, 3) p_dot = r_dot + A (omega x s)
``acceleration``            (..., T, 3) p_ddot = r_ddot + A (omegadot x s + omega x (omega
                                        x s))
``orientation``             (..., T,    R = A F: the marker's axes (columns) in global
                            3, 3)       coordinates
``angular_velocity``        (..., T, 3) A omega (global; the body's)
``angular_acceleration``    (..., T, 3) A omegadot (global; the time derivative of A omega,
                                        since A omega x A omega = 0)
=========================== =========== ==================================================

(The point's velocity and acceleration are the time derivatives of p along the run:
``tests/test_markers.py`` checks them against finite differences of the position.)
Kinematic analyses have them too (their accelerations are the acceleration analysis').
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..compiled.host_arrays import device_array


class Markers(eqx.Module):
    """Every marker of a model (``model.markers``), in the order they were added. Static:
    ``marker_names`` and ``bodies`` (each body's model index). Array leaves: ``point``
    (n, 3) and ``axes`` (n, 3, 3), body coordinates (module docstring)."""

    marker_names: tuple[str, ...] = eqx.field(static=True)
    bodies: tuple[int, ...] = eqx.field(static=True)
    point: jax.Array
    axes: jax.Array

    def index(self, name: str) -> int:
        try:
            return self.marker_names.index(name)
        except ValueError:
            raise KeyError(f"no marker {name!r}; the model's markers are "
                           f"{list(self.marker_names)}") from None  # fmt: skip


class MarkerMotion(eqx.Module):
    """A marker's motion over a run (module docstring): global position, velocity,
    acceleration (..., T, 3), orientation (..., T, 3, 3), angular velocity and angular
    acceleration (..., T, 3), a batch's axes first."""

    position: jax.Array
    velocity: jax.Array
    acceleration: jax.Array
    orientation: jax.Array
    angular_velocity: jax.Array
    angular_acceleration: jax.Array


def _mv(M, v):
    """M v over leading axes, as elementwise products and sums (no batched matmul)."""
    return jnp.sum(M * v[..., None, :], axis=-1)


def marker_motion(point, axes, r, A, rdot, omega, rddot, omegadot) -> MarkerMotion:
    """The motion of the frame (``point``, ``axes``) (body coordinates) on a body whose
    state is (r, A, rdot, omega body-frame, rddot, omegadot body-frame), any leading axes.
    Module docstring for the formulas."""
    s = jnp.broadcast_to(point, r.shape)
    w_x_s = jnp.cross(omega, s)
    return MarkerMotion(
        position=r + _mv(A, s),
        velocity=rdot + _mv(A, w_x_s),
        acceleration=rddot + _mv(A, jnp.cross(omegadot, s) + jnp.cross(omega, w_x_s)),
        orientation=A @ axes,
        angular_velocity=_mv(A, omega),
        angular_acceleration=_mv(A, omegadot),
    )


class MarkerMap(Mapping):
    """``sol.markers``: a read-only mapping from marker names to their
    :class:`MarkerMotion`, computed from the Solution's body states when read."""

    def __init__(self, markers: Markers | None, sol):
        self._markers, self._sol = markers, sol

    def _names(self) -> tuple[str, ...]:
        return () if self._markers is None else self._markers.marker_names

    def __getitem__(self, name: str) -> MarkerMotion:
        if name not in self._names():
            known = list(self._names())
            raise KeyError(
                f"no marker {name!r}; the model's markers are {known}"
                if known
                else f"no marker {name!r}: this Solution has no markers (add them with "
                "ModelBuilder.add_marker; a Solution read from a file has none)"
            )
        k = self._markers.index(name)
        b, sol = self._markers.bodies[k], self._sol

        def body(x):
            return x[..., b, :]

        return marker_motion(
            self._markers.point[k], self._markers.axes[k], body(sol.r), sol.A[..., b, :, :],
            body(sol.rdot), body(sol.omega), body(sol.rddot), body(sol.omegadot),
        )  # fmt: skip

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"MarkerMap({list(self._names())})"


def markers_from_specs(specs: list[dict], index: dict[str, int]) -> Markers | None:
    """The :class:`Markers` of a builder's marker specs (None without markers)."""
    if not specs:
        return None
    return Markers(
        marker_names=tuple(s["name"] for s in specs),
        bodies=tuple(index[s["body"]] for s in specs),
        point=device_array(np.stack([s["point"] for s in specs])),
        axes=device_array(np.stack([s["axes"] for s in specs])),
    )


__all__ = ["MarkerMap", "MarkerMotion", "Markers", "marker_motion"]
