"""The published model files of the paper (uwsbel/sbel-reproducibility, SimEngineMBD's
``sim_engine_3d``): bodies and GCON constraints without masses, which load with unit masses
and inertias and a warning unless ``masses`` supplies them."""

from __future__ import annotations

import ast
import logging
import math
from pathlib import Path

import numpy as np

from ..build import ModelBuilder
from ..errors import ModelError, ModelFileError
from ..gcons import DP1, gcon_kind
from ..model import GROUND, Model
from ..model._values import _vec3
from ..model.drivers import Expression, ExpressionError, check_expression_derivative
from ._read import _add_gcon, _get, _list, _object, _string
from .schema import _GCON_FIELDS, _PUBLISHED_KEYS

logger = logging.getLogger("jaxmbd")


def _published_angle(source: str):
    """If ``source`` is cos(angle(t)) with angle depending on t, return angle's source."""
    try:
        tree = ast.parse(source.strip().replace("^", "**"), mode="eval").body
    except SyntaxError:
        return None
    if (
        isinstance(tree, ast.Call)
        and isinstance(tree.func, ast.Name)
        and tree.func.id == "cos"
        and len(tree.args) == 1
    ):
        inner = ast.unparse(tree.args[0])
        if not Expression(inner).is_constant:
            return inner
    return None


def _load_published(path: Path, data: dict, masses: dict, drivers: dict) -> Model:
    _object(data, path, None, _PUBLISHED_KEYS["model"])
    if "name" in data and not isinstance(data["name"], str):
        raise ModelFileError(path, "name", f"expected a string, got {type(data['name']).__name__}")
    bodies = _list(data, "bodies", path)
    ids: dict[int, str] = {}
    ground_id = None
    for k, body in enumerate(bodies):
        where = f"bodies[{k}]"
        _object(body, path, where, _PUBLISHED_KEYS["body"])
        name = _string(body, "name", path, where)
        if any(name == other for other in ids.values()):
            raise ModelFileError(path, f"{where}.name", f"duplicate body name {name!r}")
        bid = _get(body, "id", path, where)
        if isinstance(bid, bool) or not isinstance(bid, int):
            raise ModelFileError(path, f"{where}.id", f"expected an integer id, got {bid!r}")
        if bid in ids:
            raise ModelFileError(path, f"{where}.id", f"duplicate body id {bid}")
        ids[bid] = GROUND if name == GROUND else name
        if name == GROUND:
            ground_id = bid
    if ground_id is None:
        raise ModelFileError(path, "bodies", "no body named 'ground' (the fixed frame)")
    unknown = set(masses) - {n for n in ids.values() if n != GROUND}
    if unknown:
        raise ModelFileError(path, "masses", f"masses given for unknown bodies {sorted(unknown)}")
    builder = ModelBuilder(name=str(data.get("name", path.stem)))
    missing_mass = []
    for k, body in enumerate(bodies):
        name = body["name"]
        if name == GROUND:
            continue
        where = f"bodies[{k}] ('{name}')"
        if name in masses:
            mass, inertia = masses[name]
        else:
            mass, inertia = 1.0, (1.0, 1.0, 1.0)
            missing_mass.append(name)
        try:
            builder.add_body(
                name,
                mass=mass,
                inertia=inertia,
                r=_get(body, "r", path, where),
                A=_get(body, "A", path, where),
                rdot=body.get("r_dot", (0.0, 0.0, 0.0)),
                omega=body.get("omega", (0.0, 0.0, 0.0)),
            )
        except ModelError as err:
            raise ModelFileError(path, where, str(err)) from None
    if missing_mass:
        logger.warning(
            "%s: no masses in the file for bodies %s; using unit masses and "
            "inertias (set the real ones with eqx.tree_at or masses=...)",
            path,
            missing_mass,
        )
    constraints = _list(data, "constraints", path)
    for k, con in enumerate(constraints):
        _object(con, path, f"constraints[{k}]", _PUBLISHED_KEYS["constraint"])
        _string(con, "name", path, f"constraints[{k}]")
        for key in ("f", "f_dot", "f_ddot"):
            value = con.get(key, "0")
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ModelFileError(
                    path,
                    f"constraints[{k}] ('{con['name']}').{key}",
                    f"expected an expression string, got {type(value).__name__}",
                )
    unused = set(drivers) - {c.get("name") for c in constraints}
    if unused:
        raise ModelFileError(
            path, "drivers", f"driver overrides for unknown constraints {sorted(unused)}"
        )
    for k, con in enumerate(constraints):
        where = f"constraints[{k}]"
        name = _string(con, "name", path, where)
        where = f"constraints[{k}] ('{name}')"
        kind = _string(con, "type", path, where)
        if kind not in ("DP1", "DP2", "D", "CD"):
            raise ModelFileError(
                path, f"{where}.type", f"unknown GCON type {kind!r}; known: DP1, DP2, D, CD"
            )
        body_names = []
        for key in ("body_i", "body_j"):
            bid = _get(con, key, path, where)
            if isinstance(bid, bool) or not isinstance(bid, int) or bid not in ids:
                raise ModelFileError(
                    path, f"{where}.{key}", f"unknown body id {bid!r}; known ids: {sorted(ids)}"
                )
            body_names.append(ids[bid])
        vectors = {key: _get(con, key, path, where) for key in _GCON_FIELDS[kind]}
        f = drivers.get(name, con.get("f", "0"))
        if isinstance(f, bool) or not isinstance(f, str | int | float):
            raise ModelFileError(
                path, f"{where}.f", f"expected an expression string, got {type(f).__name__}"
            )
        f = str(f)
        try:
            expr = Expression(f, where=f"{where}.f")
            if name not in drivers:
                _check_published_derivatives(path, where, expr, con)
            angle = _published_angle(f) if gcon_kind(kind) is DP1 else None
            if angle is not None:
                _add_published_rotation_driver(builder, path, name, body_names, vectors, angle)
            else:
                _add_gcon(builder, name, kind, body_names[0], body_names[1], vectors, f, None)
        except (ModelError, ExpressionError) as err:
            raise ModelFileError(path, where, str(err)) from None
    return builder.build()


def _check_published_derivatives(path, where, expr: Expression, con: dict):
    for key, order in (("f_dot", 1), ("f_ddot", 2)):
        if key not in con:
            continue
        try:
            diff = check_expression_derivative(expr, str(con[key]), order, where=f"{where}.{key}")
        except ExpressionError as err:
            logger.warning(
                "%s, %s.%s: cannot parse (%s); using autodiff of f", path, where, key, err
            )
            continue
        if not diff < 1e-6:
            logger.warning(
                "%s, %s.%s = %r disagrees with the derivative of f = %r (max difference %.3g "
                "over t in [0, 2]); jaxmbd uses the autodiff derivative of f",
                path,
                where,
                key,
                con[key],
                expr.source,
                diff,
            )


def _add_published_rotation_driver(builder, path, name, body_names, vectors, angle_source):
    """Replace DP1(a_i, a_j) = cos(angle(t)) by the regular rotation driver (same motion).

    The axis is n = a_i x a_j at the initial pose; the angle is measured from a_i towards
    v_i = n x a_i. If angle(0) matches minus the initial angle, the axis is flipped so that
    the driver follows the same branch as the published DP1.
    """
    body_i, body_j = body_names
    _, A_i = builder._frame(body_i, where=name)
    _, A_j = builder._frame(body_j, where=name)
    where = f"constraint '{name}'"
    a_i = A_i @ _vec3(vectors["a_bar_i"], where=f"{where}.a_bar_i", nonzero=True)
    a_j = A_j @ _vec3(vectors["a_bar_j"], where=f"{where}.a_bar_j", nonzero=True)
    a_i /= np.linalg.norm(a_i)
    a_j /= np.linalg.norm(a_j)
    n = np.cross(a_i, a_j)
    if np.linalg.norm(n) < 1e-6:
        raise ModelError(
            f"driver '{name}': the DP1 vectors are parallel at the initial pose, so the rotation "
            "axis is undefined; define a rotation driver (type ROT) with an explicit axis"
        )
    n /= np.linalg.norm(n)
    phi0 = math.atan2(np.linalg.norm(np.cross(a_i, a_j)), a_i @ a_j)
    theta0 = float(Expression(angle_source)(0.0))

    def wrap(x):
        return (x + math.pi) % (2 * math.pi) - math.pi

    if abs(wrap(theta0 - phi0)) > abs(wrap(theta0 + phi0)):
        n = -n
        phi0 = -phi0
    if abs(wrap(theta0 - phi0)) > 1e-6:
        logger.warning(
            "%s: driver '%s' prescribes %.6g rad at t = 0 but the initial pose has "
            "%.6g rad; the initial position analysis will move the bodies",
            path,
            name,
            theta0,
            phi0,
        )
    v_i = np.cross(n, a_i)
    logger.info(
        "%s: driver '%s' DP1 f = cos(%s) replaced by a rotation driver about the axis %s "
        "(normal to both vectors; same motion, regular at every angle)",
        path,
        name,
        angle_source,
        np.round(n, 6).tolist(),
    )
    builder.add_rot(
        name,
        body_i=body_i,
        u_bar_i=A_i.T @ a_i,
        v_bar_i=A_i.T @ v_i,
        body_j=body_j,
        a_bar_j=vectors["a_bar_j"],
        angle=angle_source,
    )
