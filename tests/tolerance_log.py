"""How tight the suite's tolerances are: what each ``assert_allclose`` achieved against
what it allowed.

With ``JAXMBD_TOLERANCE_LOG=FOLDER`` in the environment, ``conftest.py`` wraps
``numpy.testing.assert_allclose`` before any test module imports it (:func:`install`).
Every call then appends a JSON line to ``FOLDER/<worker>.jsonl``: the test, the call's
file and line, ``rtol`` and ``atol``, and the achieved ratio, the largest of
``|actual - desired| / (atol + rtol |desired|)`` over the elements (1 at the tolerance, 0.1
where the tolerance is ten times what was achieved). The call itself is unchanged.

    JAXMBD_TOLERANCE_LOG=/tmp/tol python -m pytest -q tests/test_foo.py
    python tests/tolerance_log.py /tmp/tol            # the call sites looser than 10x

Bare ``assert err < tol`` checks log too where pytest is told to report passing asserts
(``-o enable_assertion_pass_hook=true``; pytest rewrites the asserts for it only where its
bytecode cache has none, so give that run a cache of its own, ``PYTHONPYCACHEPREFIX``):
:func:`assertion_passed` reads the values from the first line of pytest's explanation
(``9.9e-14 < 1e-10``) and logs left / right for a comparison of two non-negative numbers.

    PYTHONPYCACHEPREFIX=/tmp/tol-pyc JAXMBD_TOLERANCE_LOG=/tmp/tol \\
        python -m pytest -q -o enable_assertion_pass_hook=true tests/test_foo.py

The summary takes each call site's worst (largest) ratio over all its calls and lists the
sites whose worst ratio is below 0.1: their tolerance is more than ten times what any of
their calls achieved. Sites with a zero tolerance (exact equality) are not listed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

ENV = "JAXMBD_TOLERANCE_LOG"


def achieved_ratio(actual, desired, rtol: float, atol: float) -> float | None:
    """max |actual - desired| / (atol + rtol |desired|) over the elements (NaN pairs and
    equal infinities left out); None where the allowed error is zero somewhere (exact)."""
    a = np.asarray(actual, dtype=np.float64)
    d = np.asarray(desired, dtype=np.float64)
    a, d = np.broadcast_arrays(a, d)
    keep = np.isfinite(a) & np.isfinite(d)
    if not keep.any():
        return None
    allowed = atol + rtol * np.abs(d[keep])
    if np.any(allowed == 0):
        return None
    return float(np.max(np.abs(a[keep] - d[keep]) / allowed))


def install(folder: str) -> None:
    """Wrap ``numpy.testing.assert_allclose`` to log each call into ``folder``."""
    import numpy.testing

    original = numpy.testing.assert_allclose
    if getattr(original, "_logged", False):
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    @functools.wraps(original)
    def logged(actual, desired, rtol=1e-7, atol=0, *args, **kwargs):
        result = original(actual, desired, rtol, atol, *args, **kwargs)  # raises first
        try:
            ratio = achieved_ratio(actual, desired, float(rtol), float(atol))
        except (TypeError, ValueError):  # not numeric (the call itself passed)
            ratio = None
        if ratio is not None:
            caller = sys._getframe(1)
            row = {
                "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
                "site": f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}",
                "rtol": float(rtol),
                "atol": float(atol),
                "ratio": ratio,
            }
            with open(out / f"{worker}.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
        return result

    logged._logged = True
    numpy.testing.assert_allclose = logged
    np.testing.assert_allclose = logged


#: a bound's comparison in the first line of pytest's explanation of a passing assert
_BOUND = re.compile(r"^(?P<left>.+?) (?P<op><=?) (?P<right>[^<>=]+)$")


def _number(text: str) -> float | None:
    """The value of a numeric expression as pytest's explanation prints it (numpy scalars
    as ``np.float64(...)``); None for anything else."""
    if not re.fullmatch(r"[\w.()+\-*/ ,e]+", text):
        return None
    try:
        value = eval(text, {"__builtins__": {}}, {"np": np, "abs": abs, "max": max})  # noqa: S307
        value = float(value)
    except Exception:  # not a plain number
        return None
    return value if np.isfinite(value) else None


def assertion_passed(folder: str, item, lineno: int, orig: str, expl: str) -> None:
    """Log a passing ``assert left < right`` (``<=``; the last comparison of a chain) whose
    two sides are non-negative numbers, right > 0, as the ratio left / right."""
    match = _BOUND.match(expl.splitlines()[0]) if expl else None
    if match is None:
        return
    left, right = _number(match["left"]), _number(match["right"])
    if left is None or right is None or left < 0 or right <= 0:
        return
    row = {
        "test": item.nodeid,
        "site": f"{Path(str(item.path)).name}:{lineno}",
        "rtol": 0.0,
        "atol": right,
        "ratio": left / right,
        "kind": "assert",
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{worker}.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")


def loose_sites(folder: str, factor: float = 10.0) -> list[dict]:
    """The call sites whose worst achieved ratio is below 1 / ``factor``, loosest first."""
    worst: dict[str, dict] = {}
    for path in Path(folder).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            kept = worst.get(row["site"])
            if kept is None or row["ratio"] > kept["ratio"]:
                worst[row["site"]] = row
    loose = [row for row in worst.values() if row["ratio"] < 1.0 / factor]
    return sorted(loose, key=lambda row: row["ratio"])


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--factor", type=float, default=10.0)
    args = parser.parse_args(argv)
    rows = loose_sites(args.folder, args.factor)
    exact = sum(row["ratio"] == 0 for row in rows)
    print(f"{len(rows)} call sites allow more than {args.factor:g}x what they achieved "
          f"({exact} of them achieved exact equality)")  # fmt: skip
    print("| site | rtol | atol (an assert's bound) | worst achieved / allowed | a test |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['site']} | {row['rtol']:.1e} | {row['atol']:.1e} | {row['ratio']:.1e} "
              f"| {row['test']} |")  # fmt: skip


if __name__ == "__main__":
    main()
