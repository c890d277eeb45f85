"""Contact (:mod:`jaxmbd.contact`): ground geometry and contact pairs."""

from __future__ import annotations

import math
from typing import Self

import numpy as np

from ..contact.build import (
    ContactSpec,
    _Body,
    build_contact_element,
    check_contact_law,
    check_contact_numbers,
)
from ..contact.narrow_phase import SLOTS, pair_kind
from ..errors import ModelError
from ..geometry import Shape, make_shapes, plane
from ..model import GROUND
from ..model._values import (
    _unit,
    _vec3,
)


class _ContactBuilder:
    """The contact methods of :class:`~jaxmbd.ModelBuilder`."""

    def add_ground_plane(self, point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 1.0), *, size=None):
        """Give the ground the plane through ``point`` normal to ``normal`` (global; the
        normal points out of the ground, towards the bodies) as collision geometry;
        ``size`` = (lx, ly): the square drawn."""
        where = "add_ground_plane"
        self._ground_shapes.append(
            plane(
                _vec3(point, where=f"{where}.point"),
                _unit(normal, where=f"{where}.normal"),
                size=size,
            )
        )
        return self

    def add_ground_shape(self, shape) -> Self:
        """Fix a shape (a :mod:`jaxmbd.geometry` shape or its dict, pose in global
        coordinates) to the ground: collision geometry (unless ``collide=False``) and
        drawing."""
        self._ground_shapes.extend(make_shapes(shape, where="add_ground_shape"))
        return self

    def _contact_spec(self, where, body_i, body_j, shapes=None, law=None, **numbers):
        try:
            values = check_contact_numbers(where, **numbers)
            check_contact_law(where, law)
        except ValueError as err:
            raise ModelError(str(err)) from None
        return ContactSpec(body_i=body_i, body_j=body_j, shapes=shapes, law=law, **values)

    def _shapes_of(self, body: str) -> list[Shape]:
        if body == GROUND:
            return self._ground_shapes
        return self._bodies[self.body_index(body)].shapes

    def _check_shape_pairs(self, where, body_i, body_j, shapes):
        """``add_contact``'s ``shapes``: pairs of indices of colliding shapes, no repeats."""
        if shapes is None:
            return None
        out = []
        lists = (self._shapes_of(body_i), self._shapes_of(body_j))
        if isinstance(shapes, str) or not hasattr(shapes, "__iter__"):
            raise ModelError(f"{where}.shapes: expected pairs (k_i, k_j) of shape indices")
        for pair in shapes:
            ok = isinstance(pair, list | tuple) and len(pair) == 2
            ok = ok and all(isinstance(k, int | np.integer) and not isinstance(k, bool)
                            for k in pair)  # fmt: skip
            if not ok:
                raise ModelError(
                    f"{where}.shapes: expected pairs (k_i, k_j) of shape indices, got {pair!r}"
                )
            for k, body, own in zip(pair, (body_i, body_j), lists, strict=True):
                if not 0 <= k < len(own) or not own[k].collide:
                    colliding = [n for n, s in enumerate(own) if s.collide]
                    raise ModelError(
                        f"{where}.shapes: {body!r} has no colliding shape {k} (its colliding "
                        f"shapes: {colliding})"
                    )
            out.append((int(pair[0]), int(pair[1])))
        if not out or len(set(out)) != len(out):
            raise ModelError(f"{where}.shapes: expected distinct pairs, at least one: {shapes!r}")
        return tuple(out)

    def add_contact(
        self, body_i, body_j, *, friction, restitution=0.0, stiffness=None, damping=None,
        exponent=1.5, slip_velocity=1e-4, torsional_friction=0.0, rolling_friction=0.0,
        margin=0.0, shapes=None, law=None,
    ) -> Self:  # fmt: skip
        """A contact pair: the colliding shapes of ``body_i`` against those of ``body_j``
        (a body or "ground"), with compliant contact (:mod:`jaxmbd.contact.law`).

        ``friction``: Coulomb's mu; ``restitution``: the coefficient of restitution e in
        [0, 1] (below 0.01 taken as 0.01); ``stiffness``: K of K delta^n (default: from the
        pair's mass and size, :mod:`jaxmbd.contact.build`); ``damping``: Hunt–Crossley's
        chi (s/m) on top of the restitution's damping (None: 0); ``exponent``: n (Hertz: 1.5);
        ``slip_velocity``: the regularisation velocity of friction (m/s);
        ``torsional_friction`` mu_t and ``rolling_friction`` mu_r (m): friction torques up
        to mu_t F_n about the normal and mu_r F_n about the tangents (MuJoCo's condim 4
        and 6; :func:`jaxmbd.contact.friction_wrench`); ``margin`` (m): the distance at
        which the surfaces start to push (the law acts on the penetration margin -
        distance; MuJoCo's margin - gap). Each is an array leaf of ``model.contacts``
        (``jax.grad`` reaches it). Bodies joined by a joint may be paired here (only
        :meth:`add_contacts` leaves them out). ``shapes``: the shape pairs checked, as
        (k_i, k_j) indices into the two bodies' shape lists (the ground's: its planes and
        shapes in the order added); default: every pair of colliding shapes (MuJoCo's
        geom-level filters, :mod:`jaxmbd.mjcf`, select pairs this way). Two bodies may have
        several pairs when each names its ``shapes`` and no shape pair is in two of them
        (shape pairs with numbers of their own, as MuJoCo's ``<contact><pair>``).
        ``law``: the contact law (:class:`jaxmbd.contact.AbstractContactLaw`; None:
        Hunt–Crossley, :class:`jaxmbd.contact.HuntCrossley`).
        """
        where = f"contact '{body_i}' - '{body_j}'"
        for key, body in (("body_i", body_i), ("body_j", body_j)):
            self._frame(body, where=f"{where}.{key}")
        if body_i == body_j:
            raise ModelError(f"{where}: a body cannot contact itself")
        if body_i == GROUND:
            raise ModelError(f"{where}: give the ground as body_j")
        shapes = self._check_shape_pairs(where, body_i, body_j, shapes)
        for c in self._contacts:  # string comparisons: a file may add thousands of pairs
            same = c.body_i == body_i and c.body_j == body_j
            if not (same or c.body_i == body_j and c.body_j == body_i):
                continue
            if shapes is None or c.shapes is None:
                raise ModelError(
                    f"{where}: duplicate contact pair (two pairs of the same bodies must each "
                    "name their shape pairs, shapes=...)"
                )
            theirs = {p if c.body_i == body_i else p[::-1] for p in c.shapes}
            if theirs & set(shapes):
                raise ModelError(
                    f"{where}: shape pairs {sorted(theirs & set(shapes))} are already in a "
                    "contact pair of these bodies"
                )
        self._contacts.append(
            self._contact_spec(
                where, body_i, body_j, shapes, friction=friction, restitution=restitution,
                stiffness=stiffness, damping=damping, exponent=exponent,
                slip_velocity=slip_velocity, torsional_friction=torsional_friction,
                rolling_friction=rolling_friction, margin=margin, law=law,
            )
        )  # fmt: skip
        return self

    def add_contacts(
        self, *, friction, restitution=0.0, stiffness=None, damping=None, exponent=1.5,
        slip_velocity=1e-4, exclude=(),
    ) -> Self:  # fmt: skip
        """Contact pairs between all bodies with colliding shapes, the ground included,
        with these parameters (as :meth:`add_contact`), resolved by :meth:`build`: every
        pair not added with :meth:`add_contact`, not in ``exclude`` (pairs of names), not
        joined by a joint (as MuJoCo's parent-child filter; pairs with the ground are kept)
        and with at least one shape pair that has a narrow phase."""
        numbers = dict(friction=friction, restitution=restitution, stiffness=stiffness,
                       damping=damping, exponent=exponent, slip_velocity=slip_velocity)  # fmt: skip
        self._contact_spec("add_contacts", "", "", **numbers)  # validate now
        pairs = []
        for pair in exclude:
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ModelError(f"add_contacts.exclude: expected pairs of names, got {pair!r}")
            pairs.append(frozenset(pair))
        self._all_contacts = {"numbers": numbers, "exclude": pairs}
        return self

    def _contact_element(self, nb: int):
        """The contact element of the pairs added (None without any)."""
        bodies = [_Body(b.name, b.mass, tuple(b.shapes)) for b in self._bodies]
        bodies.append(_Body(GROUND, math.inf, tuple(self._ground_shapes)))
        specs = list(self._contacts)
        if self._all_contacts is not None:
            joined = {frozenset((gc.body_i, gc.body_j)) for gc in self._gcons}
            taken = {frozenset((c.body_i, c.body_j)) for c in specs}
            exclude = set(self._all_contacts["exclude"])
            for k, a in enumerate(bodies):
                for b in bodies[k + 1 :]:
                    key = frozenset((a.name, b.name))
                    if key in taken or key in exclude or (key in joined and GROUND not in key):
                        continue
                    kinds = {
                        pair_kind(s.kind, t.kind)[0]
                        for s in a.shapes
                        if s.collide
                        for t in b.shapes
                        if t.collide
                    }
                    if kinds & set(SLOTS):
                        specs.append(
                            self._contact_spec("add_contacts", a.name, b.name,
                                               **self._all_contacts["numbers"])
                        )  # fmt: skip
        try:
            return build_contact_element(bodies, specs, self.gravity)
        except ValueError as err:
            raise ModelError(str(err)) from None
