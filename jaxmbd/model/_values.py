"""Checks of the numbers a user gives (builder, model files, :meth:`Model.with_joint_state`):
hostile input is refused with a message naming the object and field, never cast."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import AdjustmentWarning, ModelError

# largest magnitude accepted for any number of a model: products of two stay finite
MAX_MAGNITUDE = 1e100

#: Relative tolerance of the triangle inequality J_max <= J_a + J_b (times J_max).
TRIANGLE_RTOL = 1e-6
#: Relative tolerance of an inertia's symmetry (times its largest entry).
SYMMETRY_RTOL = 1e-9
#: A principal moment at most this times the largest counts as zero (a singular inertia).
SINGULAR_RTOL = 1e-12


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _has_non_number(value, depth: int = 0) -> bool:
    """A string, boolean, mapping or None anywhere in (nested lists of) ``value``."""
    if isinstance(value, str | bytes | bool | np.bool_ | dict) or value is None:
        return True
    if isinstance(value, list | tuple) and depth < 4:
        return any(_has_non_number(v, depth + 1) for v in value[:16])
    return False


def _coordinate_pair(joint: str, key: str, value) -> tuple:
    """A cylindrical joint's option ``key`` as (slide's, angle's); None: (None, None). Anything
    but a pair is refused, naming the joint and option."""
    if value is None:
        return (None, None)
    if isinstance(value, str | bytes | dict) or not hasattr(value, "__len__") or len(value) != 2:
        raise ModelError(
            f"joint '{joint}'.{key}: expected a pair (slide, angle) (None for a coordinate "
            f"without it), got {_short(value)}"
        )
    return tuple(value)


def _numbers(value, *, where: str, expected: str) -> np.ndarray:
    """``value`` as a float64 array of plain numbers: no strings, booleans or objects, no
    NaN or inf, no magnitude above MAX_MAGNITUDE (hostile input is refused, never cast)."""
    if _has_non_number(value):
        raise ModelError(f"{where}: expected {expected}, got {_short(value)}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise ModelError(f"{where}: expected {expected}, got {_short(value)}") from None
    if raw.dtype.kind not in "iuf":
        raise ModelError(f"{where}: expected {expected}, got {_short(value)}")
    arr = raw.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: non-finite value in {_short(value)}")
    if arr.size and np.max(np.abs(arr)) > MAX_MAGNITUDE:
        raise ModelError(f"{where}: magnitude above {MAX_MAGNITUDE:g} in {_short(value)}")
    return arr


def _vec3(value, *, where: str, nonzero: bool = False) -> np.ndarray:
    arr = _numbers(value, where=where, expected="3 numbers")
    if arr.shape != (3,):
        raise ModelError(f"{where}: expected 3 numbers, got shape {arr.shape}")
    if nonzero and np.linalg.norm(arr) < 1e-12:
        raise ModelError(f"{where}: must not be the zero vector")
    return arr


def _unit(value, *, where: str) -> np.ndarray:
    v = _vec3(value, where=where, nonzero=True)
    return v / np.linalg.norm(v)


def _rotation_matrix(value, *, where: str) -> tuple[np.ndarray, float]:
    """Nearest proper rotation to ``value`` and how far it was from it (Frobenius norm)."""
    A = _numbers(value, where=where, expected="a 3x3 matrix")
    if A.shape != (3, 3) or not np.all(np.isfinite(A)):
        raise ModelError(f"{where}: expected a finite 3x3 matrix, got shape {A.shape}")
    U, s, Vt = np.linalg.svd(A)
    if np.min(s) < 0.5 or np.linalg.det(A) <= 0:
        raise ModelError(
            f"{where}: not a rotation matrix (singular values {np.round(s, 4).tolist()}, "
            f"det {np.linalg.det(A):.3g})"
        )
    R = U @ Vt
    moved = float(np.linalg.norm(R - A))
    if moved > 1e-3:
        raise ModelError(
            f"{where}: not a rotation matrix (distance {moved:.3g} from the nearest rotation; "
            "up to 1e-3 is orthonormalised)"
        )
    return R, moved


def _frame_from_axes(x, y, *, where: str) -> np.ndarray:
    """Rotation whose columns are x, the part of y orthogonal to x, and their cross product."""
    ex = _unit(x, where=f"{where}.x")
    yv = _vec3(y, where=f"{where}.y", nonzero=True)
    along_x = ex @ yv / np.linalg.norm(yv)  # cosine of the angle between the axes
    yv = yv - ex * (ex @ yv)
    if np.linalg.norm(yv) < 1e-9:
        raise ModelError(f"{where}: x and y axes are parallel")
    ey = yv / np.linalg.norm(yv)
    if abs(along_x) > 1e-9:
        angle = math.degrees(math.acos(max(-1.0, min(1.0, along_x))))
        warnings.warn(
            f"{where}: the x and y axes are not orthogonal ({angle:.6g} deg apart); y is "
            f"replaced by its part orthogonal to x, {np.round(ey, 6).tolist()} (give orthogonal "
            "axes to silence this)",
            AdjustmentWarning,
            stacklevel=3,
        )
    return np.stack([ex, ey, np.cross(ex, ey)], axis=1)


def _perpendicular_pair(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors that with ``axis`` form a right-handed orthonormal triad (u, v, axis)."""
    n = axis / np.linalg.norm(axis)
    trial = np.eye(3)[np.argmin(np.abs(n))]
    u = trial - n * (n @ trial)
    u /= np.linalg.norm(u)
    return u, np.cross(n, u)


def _joint_values(value, size: int, *, where: str, quaternion: bool = False) -> np.ndarray:
    """``size`` numbers of a joint state (a number or a 1-vector where ``size`` is 1); a
    spherical joint's quaternion normalised."""
    expected = "a number" if size == 1 else f"{size} numbers"
    arr = _numbers(value, where=where, expected=expected)
    if arr.size != size or arr.ndim > 1:
        raise ModelError(f"{where}: expected {expected}, got shape {arr.shape}")
    arr = arr.reshape(size)
    if quaternion:
        norm = float(np.linalg.norm(arr))
        if norm < 1e-12:
            raise ModelError(f"{where}: the zero quaternion is not a rotation; give (w, x, y, z)")
        if abs(norm - 1.0) > 1e-3:
            warnings.warn(
                f"{where}: quaternion of norm {norm:.6g} normalised to "
                f"{np.round(arr / norm, 6).tolist()} (give a unit quaternion to silence this)",
                AdjustmentWarning,
                stacklevel=4,
            )
        arr = arr / norm
    return arr


def _axis_frame(axis) -> np.ndarray:
    """Joint axes (columns u, v, axis), right-handed, for a joint about or along ``axis``."""
    n = _unit(axis, where="joint axis")
    u, v = _perpendicular_pair(n)
    return np.stack([u, v, n], axis=1)


def _inertia(value, *, where: str) -> np.ndarray:
    J = _numbers(value, where=where, expected="3 principal moments or a 3x3 matrix")
    if J.shape == (3,):
        J = np.diag(J)
    if J.shape != (3, 3) or not np.all(np.isfinite(J)):
        raise ModelError(f"{where}: expected 3 moments or a 3x3 matrix, got shape {J.shape}")
    if np.max(np.abs(J - J.T)) > 1e-12 * max(1.0, np.max(np.abs(J))):
        raise ModelError(f"{where}: inertia matrix is not symmetric")
    eig = np.linalg.eigvalsh(J)
    if eig[0] < -1e-12 * max(1.0, eig[-1]) or eig[-1] <= 0:
        raise ModelError(
            f"{where}: inertia must be positive (semi-)definite with a positive moment; "
            f"principal moments {eig.tolist()}"
        )
    problem = inertia_problem(J)
    if problem is not None:
        raise ModelError(f"{where}: inertia {problem}")
    return J


def inertia_problem(J: np.ndarray) -> str | None:
    """What is wrong with one inertia matrix (3, 3), or None: symmetry, definiteness,
    the triangle inequality (for a positive definite one: a zero moment is the textbooks'
    slender or planar idealisation, which a joint may hold); the message gives the
    principal moments, largest first."""
    scale = float(np.max(np.abs(J))) if J.size else 0.0
    if not np.all(np.isfinite(J)):
        return f"is not finite ({np.round(J, 6).tolist()})"
    if np.max(np.abs(J - J.T)) > SYMMETRY_RTOL * scale:
        return f"is not symmetric ({np.round(J, 6).tolist()})"
    moments = np.linalg.eigvalsh(J)
    shown = "(" + ", ".join(f"{m:.6g}" for m in moments[::-1]) + ")"
    if moments[-1] <= 0 or moments[0] < -SINGULAR_RTOL * max(1.0, moments[-1]):
        return (f"has principal moments {shown}: they must be >= 0 and the largest "
                "positive")  # fmt: skip
    if moments[0] > SINGULAR_RTOL * moments[-1]:
        excess = moments[-1] - (moments[0] + moments[1])
        if excess > TRIANGLE_RTOL * moments[-1]:
            return (
                f"has principal moments {shown}: each must be at most the sum of the other "
                f"two (a rigid body's triangle inequality; {moments[-1]:.6g} > "
                f"{moments[0]:.6g} + {moments[1]:.6g})"
            )
    return None
