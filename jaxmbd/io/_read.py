"""Reading a model file: the JSON with its numbers checked, and the checked getters that
name the file and the field in every error."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..build import ModelBuilder
from ..errors import ModelError, ModelFileError
from ..forces import FileEntry
from ..gcons import gcon_kind
from ..model._values import MAX_MAGNITUDE, _short, _vec3
from .schema import _OBJECT_LISTS, _RANGE_KEYS, _STRING_LISTS, MAX_DEPTH, MAX_FILE_BYTES


def _read_json(path: Path):
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ModelFileError(path, None, "file not found") from None
    except OSError as err:
        raise ModelFileError(path, None, f"cannot read file: {err}") from None
    if size > MAX_FILE_BYTES:
        raise ModelFileError(path, None, f"file of {size} bytes; at most {MAX_FILE_BYTES}")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ModelFileError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ModelFileError(path, None, f"cannot read file: {err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ModelFileError(
            path, None, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise ModelFileError(path, None, "invalid JSON: nested too deeply") from None
    except ValueError as err:  # e.g. an integer literal beyond Python's digit limit
        raise ModelFileError(path, None, f"invalid JSON: {err}") from None
    _check_values(path, data, "", 0)
    return data


def _label(where: str, key, value) -> str:
    if isinstance(key, int):
        name = value.get("name") if isinstance(value, dict) else None
        return f"{where}[{key}]" + (f" ('{name}')" if isinstance(name, str) else "")
    return f"{where}.{key}" if where else str(key)


def _check_values(path, value, where: str, depth: int):
    """Refuse non-finite or out-of-range numbers and excessive nesting anywhere in the file,
    naming the field (before any number reaches numpy or JAX)."""
    if depth > MAX_DEPTH:
        raise ModelFileError(path, where, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        try:
            ok = math.isfinite(float(value)) and abs(float(value)) <= MAX_MAGNITUDE
        except OverflowError:
            ok = False
        if not ok:
            shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
            raise ModelFileError(
                path, where, f"number {shown} is not finite or above {MAX_MAGNITUDE:g}"
            )
        return
    if isinstance(value, list) and where.rpartition(".")[2] not in _OBJECT_LISTS | _STRING_LISTS:
        open_ended = where.rpartition(".")[2] in _RANGE_KEYS  # null: an unbounded side
        for k, item in enumerate(value):
            if isinstance(item, str | bool) or (item is None and not open_ended):
                raise ModelFileError(
                    path, f"{where}[{k}]", f"expected a number, got {type(item).__name__}"
                )
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        _check_values(path, item, _label(where, key, item), depth + 1)


def _object(item, path, where: str, keys: set[str]) -> dict:
    """``item`` must be a JSON object with only the schema's keys."""
    if not isinstance(item, dict):
        raise ModelFileError(path, where, f"expected an object, got {type(item).__name__}")
    if where and isinstance(item.get("name"), str) and where.endswith("]"):
        where = f"{where} ('{item['name']}')"
    unknown = sorted(set(item) - keys)
    if unknown:
        raise ModelFileError(path, where, f"unknown field(s) {unknown}; allowed: {sorted(keys)}")
    return item


def _string(obj, key, path, where, *, default=...) -> str:
    value = _get(obj, key, path, where, default=default)
    if not isinstance(value, str) or not value:
        raise ModelFileError(
            path, f"{where}.{key}", f"expected a non-empty string, got {type(value).__name__}"
        )
    return value


def _get(obj, key, path, where, *, default=...):
    if not isinstance(obj, dict):
        raise ModelFileError(path, where, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        if default is ...:
            raise ModelFileError(path, f"{where}.{key}", "missing required field")
        return default
    return obj[key]


def _list(obj, key, path, *, required=True):
    value = _get(obj, key, path, "model", default=... if required else [])
    if not isinstance(value, list):
        raise ModelFileError(path, key, f"expected a list, got {type(value).__name__}")
    return value


class _Entry(FileEntry):
    """One entry (a JSON object) of a model file, read through the checked getters."""

    def __init__(self, obj: dict, path: Path, where: str, index: int):
        self.obj, self.path, self.where, self.index = obj, path, where, index

    def get(self, key, default=...):
        return _get(self.obj, key, self.path, self.where, default=default)

    def string(self, key, default=...):
        return _string(self.obj, key, self.path, self.where, default=default)

    def flag(self, key, default=False):
        value = self.obj.get(key, default)
        if not isinstance(value, bool):
            raise ModelFileError(
                self.path, f"{self.where}.{key}", f"must be true or false, got {_short(value)}"
            )
        return value

    def vector(self, key):
        try:
            return _vec3(self.get(key), where=f"{self.where}.{key}")
        except ModelError as err:
            raise ModelFileError(self.path, self.where, str(err)) from None


def _add_gcon(builder: ModelBuilder, name, kind, body_i, body_j, vectors, f, joint):
    spec = gcon_kind(kind)
    getattr(builder, spec.builder_method)(
        name, body_i=body_i, body_j=body_j, joint=joint, **{spec.file_value: f}, **vectors
    )
