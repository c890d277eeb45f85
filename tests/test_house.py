"""The house rule "nothing is found by comparing names or kinds when an interface can ask"
(/work/shared/notes/style.md, DESIGN.md): the comparisons of a kind or a name with a string,
and of anything with a MuJoCo enum constant, in jaxmbd/ are counted against an explicit
allow-list, so that a new ``kind == "..."`` chain cannot come in silently. A kind is asked
through its record (a registry from the name or MuJoCo's enum to a record or class that
says what it does); where a comparison stays, the list says why.

Fast: it parses the source (no JAX)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "jaxmbd"

#: Names that hold a kind or a name: a comparison of one with a string literal is counted.
KIND_OR_NAME = re.compile(r"(^|_)(kind|kinds|type|types|stype|name|names|shape|composition)$")
#: MuJoCo's enum constants (``mjtJoint.mjJNT_HINGE``, ...): any comparison with one counts.
MUJOCO_ENUM = re.compile(r"^mj[A-Za-z]*_[A-Z0-9_]+$")

#: {file: (count, why the comparisons stay)} of comparisons of a kind or a name with a string.
STRING_ALLOWED = {
    "model/_values.py": (1, "numpy's own interface: dtype.kind codes of a user's array"),
    "build/joints.py": (1, "a user's joint name may not hold '.', which names coordinates"),
    "envs/_model_env.py": (
        1,
        "the stability check builds the named explicit step's amplification matrix",
    ),
    "envs/_base.py": (2, "__getattr__'s protocol: the attribute names it must not forward"),
    "envs/wrappers.py": (1, "the metric key 'reward' has a sum of its own in the episode"),
    "io/published.py": (1, "reading a published file: the constraint kinds it may name"),
    "mjcf/__init__.py": (1, "MuJoCo's default model name 'MuJoCo Model' means no name was given"),
}

#: {file: (count, why)} of comparisons with MuJoCo enum constants.
ENUM_ALLOWED = {
    "mjcf/_actuators.py": (5, "transmission, gain and bias types (being extended)"),
    "mjcf/_contact.py": (1, "one option read: the model's friction cone"),
    "mjcf/_equalities.py": (1, "one flag read: site or body semantics of a connect's objects"),
    "mjcf/_sensors.py": (
        4,
        "the actuator force and rangefinder sensors' branches, a rangefinder on a site only "
        "(being extended)",
    ),
    "mjcf/__init__.py": (2, "reading the ground's geoms: planes and height fields"),
    "envs/quadruped.py": (
        3,
        "dm_control's own selections: the rangefinders make_model removes and escape reads "
        "(Physics.rangefinder), the hinges of the egocentric state",
    ),
}


def _is_string(node) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
        return all(_is_string(e) for e in node.elts)
    return False


def _is_enum(node) -> bool:
    return any(
        isinstance(sub, ast.Attribute) and MUJOCO_ENUM.match(sub.attr) for sub in ast.walk(node)
    )


def _subject(node) -> str:
    """The name a compared expression goes by: a variable, attribute, string key or call."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        return _subject(node.value)
    if isinstance(node, ast.Call):
        return _subject(node.func)
    return ""


def comparisons(source: str) -> tuple[list[int], list[int]]:
    """(lines of kind/name-with-string comparisons, lines of MuJoCo enum comparisons)."""
    strings, enums = [], []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:], strict=False):
            if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                continue
            if _is_enum(a) or _is_enum(b):
                enums.append(node.lineno)
                break
            if (_is_string(a) and KIND_OR_NAME.search(_subject(b))) or (
                _is_string(b) and KIND_OR_NAME.search(_subject(a))
            ):
                strings.append(node.lineno)
                break
    return strings, enums


def _counts():
    strings, enums = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        s, e = comparisons(path.read_text())
        name = path.relative_to(PACKAGE).as_posix()
        if s:
            strings[name] = s
        if e:
            enums[name] = e
    return strings, enums


@pytest.mark.parametrize(("kind", "allowed"), [("string", STRING_ALLOWED),
                                               ("enum", ENUM_ALLOWED)])  # fmt: skip
def test_kind_and_name_comparisons_are_on_the_allow_list(kind, allowed):
    found = _counts()[0 if kind == "string" else 1]
    new = {f: lines for f, lines in found.items() if len(lines) > allowed.get(f, (0, ""))[0]}
    assert not new, (
        f"{kind} comparisons of kinds or names beyond the allow-list, file: lines {new}: ask "
        "the kind's record (a registry from the name or MuJoCo's enum to a record or class), "
        "or add the file to the list in tests/test_house.py with the reason it must stay"
    )
    stale = {f: (len(found.get(f, [])), n) for f, (n, _) in allowed.items()
             if len(found.get(f, [])) < n}  # fmt: skip
    assert not stale, f"fewer comparisons than listed (found, listed): {stale}; lower the list"


def test_string_comparisons_stay_few():
    assert sum(n for n, _ in STRING_ALLOWED.values()) <= 10


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('if kind == "site":\n    pass\n', ([1], [])),
        ('x = spec.kind not in ("revolute", "translational")\n', ([1], [])),
        ('x = e["kind"] == "fixed"\n', ([1], [])),
        ("x = stype in (int(S.mjSENS_TENDONPOS), int(S.mjSENS_TENDONVEL))\n", ([], [1])),
        ("x = kinds[k] == int(T.mjJNT_HINGE)\n", ([], [1])),
        ('x = mode == "fast"\n', ([], [])),  # an option, not a kind
        ("x = KINDS[kind].wraps\n", ([], [])),  # asking the record
    ],
)
def test_the_count_sees_kind_comparisons(source, expected):
    assert comparisons(source) == expected
