"""Visual geometry of bodies: shapes with a size and a local pose, for drawing only.

A body carries zero or more :class:`Shape` objects in its own (centre-of-mass) frame. They
are static metadata of the :class:`~jaxmbd.model.Model` (hashable, not array leaves): they
play no part in the dynamics, so ``jax.grad``, ``vmap`` and ``stack_models`` never see them.
A body without shapes is drawn as a **stick figure** (:func:`default_shapes`), the way
MuJoCo and Exudyn draw links: capsules from its centre of mass to the points where its joints
attach (:func:`joint_points`, read from the model's constraints), one radius for the whole
mechanism (:func:`stick_radius`). A body with no joint point away from its centre of mass is
drawn as its homogeneous **box of equal inertia** (:func:`equivalent_box`), from the model's
current mass and inertia. Ground attachments of spherical, revolute and universal joints are
drawn as small dark anchors (:func:`ground_shapes`).

Shape types and their fields (lengths in model units; JSON keys in parentheses):

========== =================================================================================
box        ``size`` = (lx, ly, lz) full edge lengths along the shape's x, y, z
cylinder   ``radius``, ``length`` along z, centred; optional ``inner_radius`` (a tube)
sphere     ``radius``
capsule    ``radius``, ``length`` of the cylindrical part along z (hemispherical caps)
ellipsoid  ``size`` = (lx, ly, lz) full axis lengths along the shape's x, y, z (twice the
           semi-axes)
cone       ``radius`` of the base (centred at the shape origin), apex at z = ``length``
pyramid    ``size`` = (lx, ly) of the rectangular base (centred at the origin), apex at
           z = ``height``
mesh       ``vertices`` (n, 3) and triangular ``faces`` (k, 3) of 0-based vertex indices
hfield     ``grid`` = (nrow, ncol), ``base`` and ``vertices`` (nrow ncol, 3): MuJoCo's height
           field, elevations over a regular grid centred on the origin (x along the
           columns, y along the rows, row-major), each cell two triangular prisms down to
           z = -base (:func:`height_field`; :mod:`jaxmbd.contact.height_field`)
plane      the plane z = 0 of the shape frame, on the ground only (``add_ground_plane``);
           optional ``size`` = (lx, ly): the square drawn (default 1 x 1)
========== =================================================================================

The pose: ``pos`` (shape origin in the body frame, default 0) and either ``A`` (3x3 rotation,
shape to body) or ``axis`` (the body-frame direction of the shape's z axis), default identity.
``color`` is an optional matplotlib/CSS colour string.

Collision: shapes also collide, unless ``collide=False`` (JSON ``"collide": false``): a
contact pair (:meth:`~jaxmbd.ModelBuilder.add_contact`) checks the colliding shapes of its
two bodies (spheres, capsules, boxes, cylinders, ellipsoids, meshes (their convex hulls) and the
ground's planes; see
:mod:`jaxmbd.contact`). Shapes collide only where a contact pair is added: a model without
pairs runs as before.

The parts, one concept each: :mod:`jaxmbd.geometry._shape` (the :class:`Shape` record, its
constructors and mass properties), :mod:`jaxmbd.geometry._shape_kinds` (the kinds' records and
meshes) and :mod:`jaxmbd.geometry._default_look` (stick figures, boxes of equal inertia, ground
anchors and rails).
"""

from __future__ import annotations

from ._default_look import (
    GROUND_COLOR,
    STICK_RADIUS,
    STICK_RADIUS_PER_LINK,
    GroundSlide,
    JointPoint,
    body_shapes,
    default_shapes,
    equivalent_box,
    extent,
    ground_shapes,
    ground_slides,
    joint_points,
    model_shapes,
    stick_figure,
    stick_radius,
)
from ._shape import (
    Shape,
    box,
    capsule,
    cone,
    cylinder,
    ellipsoid,
    height_field,
    make_shape,
    make_shapes,
    mass_properties,
    mesh,
    plane,
    pyramid,
    sphere,
)
from ._shape_kinds import (
    BOX,
    CAPSULE,
    CONE,
    CYLINDER,
    ELLIPSOID,
    HFIELD,
    MESH,
    PLANE,
    PYRAMID,
    SHAPE_BY_NAME,
    SHAPE_KINDS,
    SPHERE,
    ShapeKind,
    height_field_points,
    shape_kind,
)

__all__ = [
    "BOX",
    "CAPSULE",
    "CONE",
    "CYLINDER",
    "ELLIPSOID",
    "GROUND_COLOR",
    "GroundSlide",
    "HFIELD",
    "JointPoint",
    "MESH",
    "PLANE",
    "PYRAMID",
    "SHAPE_BY_NAME",
    "SHAPE_KINDS",
    "SPHERE",
    "STICK_RADIUS",
    "STICK_RADIUS_PER_LINK",
    "Shape",
    "ShapeKind",
    "body_shapes",
    "box",
    "capsule",
    "cone",
    "cylinder",
    "default_shapes",
    "ellipsoid",
    "equivalent_box",
    "extent",
    "ground_shapes",
    "ground_slides",
    "height_field",
    "height_field_points",
    "joint_points",
    "make_shape",
    "make_shapes",
    "mass_properties",
    "mesh",
    "model_shapes",
    "plane",
    "pyramid",
    "shape_kind",
    "sphere",
    "stick_figure",
    "stick_radius",
]
