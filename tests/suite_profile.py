"""Sum a suite profile (``JAXMBD_SUITE_PROFILE=FOLDER python -m pytest``): per test file and
in all, the seconds of tracing, lowering, XLA compile and the rest (running, Python).

    python tests/suite_profile.py FOLDER [--top 30]
"""

import argparse
import collections
import json
from pathlib import Path

PARTS = ("trace", "lower", "compile")


def profile_rows(folder: Path) -> list[dict]:
    """The per-test rows the workers wrote into ``folder`` (one JSON object per test)."""
    return [json.loads(line) for f in folder.glob("*.jsonl") for line in f.open()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    rows = profile_rows(args.folder)
    files = collections.defaultdict(lambda: collections.Counter())
    for row in rows:
        file = row["test"].split("::")[0]
        files[file]["wall"] += row["wall"]
        files[file]["tests"] += 1
        for part in PARTS:
            files[file][part] += row.get(part, 0.0)
    total = sum(files.values(), collections.Counter())
    print(f"{'file':55s} {'tests':>5s} {'wall':>7s} " + " ".join(f"{p:>7s}" for p in PARTS))
    for file, c in sorted(files.items(), key=lambda kv: -kv[1]["wall"])[: args.top]:
        print(
            f"{file:55s} {c['tests']:5d} {c['wall']:7.1f} "
            + " ".join(f"{c[p]:7.1f}" for p in PARTS)
        )
    print(f"{'all':55s} {total['tests']:5d} {total['wall']:7.1f} "
          + " ".join(f"{total[p]:7.1f}" for p in PARTS))  # fmt: skip


if __name__ == "__main__":
    main()
