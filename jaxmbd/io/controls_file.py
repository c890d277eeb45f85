"""Actuator controls from a CSV file (``jaxmbd simulate MODEL --controls u.csv``).

The first line names the columns: every actuator of the model once (``model.actuators
.actuator_names``, any order), and optionally ``t``. Each further line holds numbers.

* Without ``t``: one line per step, line k acting from t = k h to (k + 1) h (as
  ``simulate(controls=u)`` with u of shape (N, nu), N = round(t_end / h)), or a single
  line held over the whole run.
* With ``t``: times in increasing order, the first 0; each line's controls hold from its
  time until the next line's (zero-order hold), and step k takes the line in force at its
  start k h.

:func:`read_controls` returns the (N, nu) array that ``simulate(controls=...)`` takes; a
wrong header, a missing or unknown actuator, a non-number, too few lines or unordered
times raise a ValueError naming the file, the line and what was expected.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

#: Slack (in steps) when a step's start is compared with the times of the file.
TIME_SLACK = 1e-9


def _rows(path: Path, names: tuple[str, ...]):
    where = f"controls file {str(path)!r}"
    try:
        with path.open(newline="") as fh:
            lines = [row for row in csv.reader(fh) if row and any(c.strip() for c in row)]
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{where}: cannot read it ({err})") from None
    if not lines:
        raise ValueError(f"{where}: empty; expected a header naming the actuators {list(names)}")
    header = [c.strip() for c in lines[0]]
    duplicated = sorted({c for c in header if header.count(c) > 1})
    unknown = [c for c in header if c != "t" and c not in names]
    missing = [n for n in names if n not in header]
    if duplicated or unknown or missing:
        problems = "; ".join(
            text
            for text in (
                f"columns named twice: {duplicated}" if duplicated else "",
                f"unknown columns {unknown}" if unknown else "",
                f"missing actuators {missing}" if missing else "",
            )
            if text
        )
        raise ValueError(
            f"{where}: {problems}; the header names every actuator {list(names)} once, and "
            "optionally a time column 't'"
        )
    values = []
    for number, row in enumerate(lines[1:], start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{where}, line {number}: {len(row)} values, expected {len(header)} ({header})"
            )
        try:
            values.append([float(c) for c in row])
        except ValueError:
            raise ValueError(f"{where}, line {number}: not numbers: {row}") from None
    if not values:
        raise ValueError(f"{where}: a header but no values")
    table = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(table)):
        line = int(np.nonzero(~np.all(np.isfinite(table), axis=1))[0][0]) + 2
        raise ValueError(f"{where}, line {line}: values are not finite")
    columns = [header.index(n) for n in names]
    times = table[:, header.index("t")] if "t" in header else None
    return where, times, table[:, columns]


def read_controls(path, model, *, t_end: float, h: float) -> np.ndarray:
    """The per-step controls (N, nu) of ``model`` from the CSV file ``path`` for a run of
    t_end / h steps (see the module docstring for the format)."""
    path = Path(path)
    if model.nu == 0:
        raise ValueError(f"--controls given, but model '{model.name}' has no actuators")
    names = tuple(model.actuators.actuator_names)
    where, times, u = _rows(path, names)
    n = int(round(t_end / h))
    if times is None:
        if len(u) == 1:
            return np.broadcast_to(u, (n, len(names))).copy()
        if len(u) != n:
            raise ValueError(
                f"{where}: {len(u)} lines of controls, expected one per step ({n} = t_end / h = "
                f"{t_end} / {h}) or one held over the run; or add a time column 't'"
            )
        return u
    if times[0] != 0.0:
        raise ValueError(f"{where}: the first time is {times[0]}, expected 0")
    if np.any(np.diff(times) <= 0):
        line = int(np.nonzero(np.diff(times) <= 0)[0][0]) + 3
        raise ValueError(f"{where}, line {line}: times must increase")
    starts = np.arange(n) * h
    rows = np.searchsorted(times, starts + TIME_SLACK * h, side="right") - 1
    return u[rows]


__all__ = ["read_controls"]
