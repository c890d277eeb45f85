"""Fluid forces: MuJoCo's two stateless models of a medium of density rho and viscosity
beta moving at a uniform ``wind`` (MuJoCo documentation, Computation, "Fluid forces";
source ``engine_passive.c``).

* **Inertia box** (``mj_inertiaBoxFluidModel``): each part moves as its equivalent inertia
  box, full sides b_i = sqrt(6 (I_j + I_k - I_i) / m) along the principal axes of inertia.
  In the box frame, at the centre of mass, with v the velocity relative to the wind and
  omega the angular velocity, the force and torque are, component i (j, k the others),
  f_i = -3 pi d beta v_i - rho/2 b_j b_k |v_i| v_i and
  g_i = -pi d^3 beta omega_i - rho/64 b_i (b_j^4 + b_k^4) |omega_i| omega_i,
  with d = (b_x + b_y + b_z) / 3 (Stokes drag of the sphere of that diameter, plus
  quadratic drag).
* **Ellipsoid** (``mj_ellipsoidFluidModel``, geoms with ``fluidshape="ellipsoid"``): each
  geom is the ellipsoid of its semi-axes (``mju_geomSemiAxes``); in the geom's frame at its
  centre it feels the gyroscopic forces of its added mass (``mj_addedMassForces``), blunt
  and slender quadratic drag, angular drag, Stokes drag, Kutta lift and Magnus force
  (``mj_viscousForces``), scaled by its interaction coefficient. MuJoCo leaves out the
  added-mass force proportional to the acceleration (``mj_addedMassForces`` is called
  without accelerations, "disabled due to dependency on qacc"); so does this element,
  whose forces are functions of the state alone. The added mass and inertia per unit
  density (``virtual_mass``, ``virtual_inertia``) are MuJoCo's compiled values
  (``geom_fluid``).

Each part (a MuJoCo body's inertia box, a geom's ellipsoid) is fixed on one body: its
frame is ``point`` (from the centre of mass) and ``rotation`` (axes as columns) in the
body frame. The medium's ``density``, ``viscosity`` and ``wind`` are array leaves, so
``jax.grad`` reaches them.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..errors import ModelError
from . import AbstractForce, BodyState, register_force_type

#: MuJoCo's mjMINVAL: the floor of the divisions of the ellipsoid model
MINVAL = 1e-15


def _safe_sqrt(x):
    """sqrt(x) with a finite derivative at x = 0 (zero there), for norms of velocities
    that vanish at rest."""
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0)


def _norm(x):
    return _safe_sqrt(jnp.sum(x * x, -1))


def inertia_box_sides(mass, principal_inertia):
    """Full sides (..., 3) of the equivalent inertia box of a body of ``mass`` with
    principal moments ``principal_inertia`` (..., 3) (MuJoCo's
    ``mj_inertiaBoxFluidModel``, its floor mjMINVAL on I_j + I_k - I_i)."""
    inertia = np.asarray(principal_inertia, dtype=np.float64)
    total = inertia.sum(-1, keepdims=True)
    moments = np.maximum(MINVAL, total - 2.0 * inertia)
    return np.sqrt(moments / np.asarray(mass, dtype=np.float64)[..., None] * 6.0)


def inertia_box_forces(lin, ang, sides, density, viscosity):
    """(force, torque) (k, 3) of the inertia-box model in the box frame for velocities
    ``lin`` (relative to the wind) and ``ang`` (k, 3) (``mj_inertiaBoxFluidModel``)."""
    diameter = jnp.mean(sides, -1, keepdims=True)
    force = -3.0 * jnp.pi * diameter * viscosity * lin
    torque = -jnp.pi * diameter**3 * viscosity * ang
    bx, by, bz = sides[:, 0], sides[:, 1], sides[:, 2]
    area = jnp.stack([by * bz, bx * bz, bx * by], -1)
    force = force - 0.5 * density * area * jnp.abs(lin) * lin
    lever = jnp.stack([bx * (by**4 + bz**4), by * (bx**4 + bz**4), bz * (bx**4 + by**4)], -1)
    torque = torque - density * lever * jnp.abs(ang) * ang / 64.0
    return force, torque


def _max_moment(semiaxes, axis: int):
    d0 = semiaxes[:, axis]
    d1, d2 = semiaxes[:, (axis + 1) % 3], semiaxes[:, (axis + 2) % 3]
    return 8.0 / 15.0 * jnp.pi * d0 * jnp.maximum(d1, d2) ** 4


def ellipsoid_forces(lin, ang, semiaxes, coefficients, virtual_mass, virtual_inertia,
                     density, viscosity):  # fmt: skip
    """(force, torque) (k, 3) of the ellipsoid model in the geom frame for velocities
    ``lin`` (relative to the wind) and ``ang`` (k, 3). ``coefficients`` (k, 6): interaction,
    blunt drag, slender drag, angular drag, Kutta lift, Magnus lift (MuJoCo's ``geom_fluid``
    order). ``mj_addedMassForces`` without accelerations, then ``mj_viscousForces``."""
    interaction, blunt, slender, angular, kutta, magnus = (coefficients[:, i, None]
                                                           for i in range(6))  # fmt: skip
    # added mass: gyroscopic terms of the fluid's momentum moving with the body
    momentum = density * virtual_mass * lin
    angular_momentum = density * virtual_inertia * ang
    force = jnp.cross(momentum, ang)
    torque = jnp.cross(momentum, lin) + jnp.cross(angular_momentum, ang)

    a = semiaxes
    volume = 4.0 / 3.0 * jnp.pi * jnp.prod(a, -1, keepdims=True)
    d_max = jnp.max(a, -1, keepdims=True)
    d_min = jnp.min(a, -1, keepdims=True)
    d_mid = jnp.sum(a, -1, keepdims=True) - d_max - d_min
    area_max = jnp.pi * d_max * d_mid
    magnus_force = jnp.cross(ang, lin) * magnus * density * volume

    # products of the other two semi-axes, per axis: (a1 a2, a2 a0, a0 a1)
    others = jnp.stack([a[:, 1] * a[:, 2], a[:, 2] * a[:, 0], a[:, 0] * a[:, 1]], -1)
    proj_denom = jnp.sum(others**4 * lin**2, -1, keepdims=True)
    proj_num = jnp.sum((others * lin) ** 2, -1, keepdims=True)
    area_proj = jnp.pi * _safe_sqrt(proj_denom / jnp.maximum(MINVAL, proj_num))
    normal = others**2 * lin
    speed = _norm(lin)[:, None]
    cos_alpha = proj_num / jnp.maximum(MINVAL, speed * proj_denom)
    circulation = jnp.cross(normal, lin) * kutta * density * cos_alpha * area_proj
    kutta_force = jnp.cross(circulation, lin)

    sphere_diameter = 2.0 / 3.0 * jnp.sum(a, -1, keepdims=True)
    stokes_force = 3.0 * jnp.pi * sphere_diameter
    stokes_torque = jnp.pi * sphere_diameter**3
    moment_max = 8.0 / 15.0 * jnp.pi * d_mid * d_max**4
    moments = jnp.stack([_max_moment(a, i) for i in range(3)], -1)
    drag_moments = ang * (angular * moments + slender * (moment_max - moments))
    drag_lin = viscosity * stokes_force + density * speed * (
        area_proj * blunt + slender * (area_max - area_proj)
    )
    drag_ang = viscosity * stokes_torque + density * _norm(drag_moments)[:, None]
    torque = torque - drag_ang * ang
    force = force + magnus_force + kutta_force - drag_lin * lin
    return interaction * force, interaction * torque


def _incidence(bodies: tuple[int, ...], nb: int) -> np.ndarray:
    """(nb, k) ones where part k is on body b (parts on the ground, index nb, left out)."""
    out = np.zeros((nb, len(bodies)))
    for k, b in enumerate(bodies):
        if b < nb:
            out[b, k] = 1.0
    return out


class _Parts(eqx.Module):
    """Frames of parts fixed on bodies: ``body`` (static), ``point`` (k, 3) from the body's
    centre of mass and ``rotation`` (k, 3, 3), axes as columns, both in the body frame."""

    body: tuple[int, ...] = eqx.field(static=True)
    point: jax.Array
    rotation: jax.Array

    def velocities(self, state: BodyState, wind):
        """(linear velocity relative to the wind, angular velocity), each (k, 3) in the part
        frame at its origin (MuJoCo's ``mj_objectVelocity`` with flg_local, minus the
        wind)."""
        b = np.asarray(self.body, dtype=int)
        A, omega = state.A[b], state.omega[b]
        v_body = jnp.einsum("kji,kj->ki", A, state.rdot[b] - wind) + jnp.cross(omega, self.point)
        lin = jnp.einsum("kji,kj->ki", self.rotation, v_body)
        ang = jnp.einsum("kji,kj->ki", self.rotation, omega)
        return lin, ang

    def body_forces(self, state: BodyState, force, torque):
        """(f (nb, 3) global at the centres of mass, n_bar (nb, 3) body frame) of part-frame
        forces and torques (k, 3) acting at the parts' origins."""
        b = np.asarray(self.body, dtype=int)
        f_bar = jnp.einsum("kij,kj->ki", self.rotation, force)
        n_bar = jnp.einsum("kij,kj->ki", self.rotation, torque) + jnp.cross(self.point, f_bar)
        f = jnp.einsum("kij,kj->ki", state.A[b], f_bar)
        to_bodies = jnp.asarray(_incidence(self.body, state.r.shape[0]))
        return to_bodies @ f, to_bodies @ n_bar


class InertiaBoxParts(_Parts):
    """Equivalent inertia boxes (MuJoCo bodies): frames at their centres of mass along
    their principal axes, full ``sides`` (k, 3) (:func:`inertia_box_sides`)."""

    sides: jax.Array


class EllipsoidParts(_Parts):
    """Fluid ellipsoids (MuJoCo geoms with ``fluidshape="ellipsoid"``): frames at the geoms,
    ``semiaxes`` (k, 3), ``coefficients`` (k, 6) (interaction, blunt drag, slender drag,
    angular drag, Kutta lift, Magnus lift), ``virtual_mass`` and ``virtual_inertia`` (k, 3)
    per unit density."""

    semiaxes: jax.Array
    coefficients: jax.Array
    virtual_mass: jax.Array
    virtual_inertia: jax.Array


@register_force_type("fluid")
class FluidForce(AbstractForce):
    """MuJoCo's fluid forces on inertia boxes and ellipsoids fixed on bodies (see the module
    docstring). ``density`` (rho), ``viscosity`` (beta) and ``wind`` (3,) (global) are
    those of ``<option>``; ``boxes`` and ``ellipsoids`` may be None."""

    density: jax.Array
    viscosity: jax.Array
    wind: jax.Array
    boxes: InertiaBoxParts | None = None
    ellipsoids: EllipsoidParts | None = None
    file_keys: ClassVar[frozenset[str]] = frozenset(
        {"density", "viscosity", "wind", "boxes", "ellipsoids"}
    )

    def __call__(self, t, state):
        nb = state.r.shape[0]
        f = jnp.zeros((nb, 3), state.r.dtype)
        n = jnp.zeros((nb, 3), state.r.dtype)
        if self.boxes is not None and self.boxes.body:
            lin, ang = self.boxes.velocities(state, self.wind)
            force, torque = inertia_box_forces(lin, ang, self.boxes.sides, self.density,
                                               self.viscosity)  # fmt: skip
            df, dn = self.boxes.body_forces(state, force, torque)
            f, n = f + df, n + dn
        if self.ellipsoids is not None and self.ellipsoids.body:
            e = self.ellipsoids
            lin, ang = e.velocities(state, self.wind)
            force, torque = ellipsoid_forces(
                lin, ang, e.semiaxes, e.coefficients, e.virtual_mass, e.virtual_inertia,
                self.density, self.viscosity,
            )  # fmt: skip
            df, dn = e.body_forces(state, force, torque)
            f, n = f + df, n + dn
        return f, n

    @property
    def bodies(self):
        parts = [p for p in (self.boxes, self.ellipsoids) if p is not None]
        return tuple(sorted({b for p in parts for b in p.body}))

    def to_json(self, body_label):
        def frames(parts, **fields):
            return [
                {"body": body_label(b), "point": np.asarray(parts.point[k]).tolist(),
                 "rotation": np.asarray(parts.rotation[k]).tolist(),
                 **{key: np.asarray(value[k]).tolist() for key, value in fields.items()}}
                for k, b in enumerate(parts.body)
            ]  # fmt: skip

        entry = {
            "type": self.file_type,
            "density": float(self.density),
            "viscosity": float(self.viscosity),
            "wind": np.asarray(self.wind).tolist(),
        }
        if self.boxes is not None:
            entry["boxes"] = frames(self.boxes, sides=self.boxes.sides)
        if self.ellipsoids is not None:
            e = self.ellipsoids
            entry["ellipsoids"] = frames(
                e, semiaxes=e.semiaxes, coefficients=e.coefficients,
                virtual_mass=e.virtual_mass, virtual_inertia=e.virtual_inertia,
            )  # fmt: skip
        return entry

    @classmethod
    def from_json(cls, builder, entry):
        """The entry :meth:`to_json` writes (parts' frames in their bodies' frames)."""

        def parts(key, kind, fields):
            rows = entry.get(key, None)
            if rows is None:
                return None
            where = f"{entry.where}.{key}"
            if not isinstance(rows, list):
                raise _entry_error(where, "a list of parts")
            body = tuple(builder.body_index(_field(r, "body", where)) for r in rows)
            arrays = {
                name: jnp.asarray(np.asarray([_field(r, name, where) for r in rows],
                                             dtype=np.float64).reshape((len(rows), *shape)))
                for name, shape in fields.items()
            }  # fmt: skip
            return kind(body=body, **arrays)

        boxes = parts("boxes", InertiaBoxParts,
                      {"point": (3,), "rotation": (3, 3), "sides": (3,)})  # fmt: skip
        ellipsoids = parts("ellipsoids", EllipsoidParts, {
            "point": (3,), "rotation": (3, 3), "semiaxes": (3,), "coefficients": (6,),
            "virtual_mass": (3,), "virtual_inertia": (3,)})  # fmt: skip
        builder.add_force(
            fluid_force(
                density=entry.get("density"),
                viscosity=entry.get("viscosity"),
                wind=entry.vector("wind"),
                boxes=boxes,
                ellipsoids=ellipsoids,
                where=entry.where,
            )  # fmt: skip
        )


def _entry_error(where: str, what: str):
    return ModelError(f"{where}: expected {what}")


def _field(row, key: str, where: str):
    if not isinstance(row, dict) or key not in row:
        raise _entry_error(where, f"parts with a '{key}' field")
    return row[key]


def fluid_force(*, density, viscosity, wind=(0.0, 0.0, 0.0), boxes=None, ellipsoids=None,
                where: str = "fluid force") -> FluidForce:  # fmt: skip
    """A :class:`FluidForce` after checking the medium: ``density`` and ``viscosity``
    non-negative finite numbers, ``wind`` three finite numbers."""
    values = {}
    for key, value in (("density", density), ("viscosity", viscosity)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ModelError(f"{where}: {key} must be a number, got {value!r}") from None
        if not (np.isfinite(number) and number >= 0):
            raise ModelError(f"{where}: {key} must be a non-negative number, got {value!r}")
        values[key] = jnp.asarray(number, dtype=jnp.float64)
    wind = np.asarray(wind, dtype=np.float64)
    if wind.shape != (3,) or not np.all(np.isfinite(wind)):
        raise ModelError(f"{where}: wind must be three finite numbers, got {wind!r}")
    return FluidForce(values["density"], values["viscosity"], jnp.asarray(wind), boxes,
                      ellipsoids)  # fmt: skip
