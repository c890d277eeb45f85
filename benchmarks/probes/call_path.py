"""Which modules a model passes through on its way from ``simulate`` to the step.

    python -m benchmarks.probes.call_path [--layers pyproject.toml]

Records every call into jaxmbd that receives a ``Model`` as an argument (the model's own
methods aside) during the first, tracing call of ``simulate`` on the double pendulum;
consecutive calls in one module form one stop. Prints the modules visited, the stops, how
often the path comes back to a module it had left, and the calls that climb from a lower
layer to a higher one (layers from the import-linter contract in ``pyproject.toml``).
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import tomllib

import jaxmbd as mbd
from jaxmbd.model import Model


def layer_ranks(pyproject: pathlib.Path) -> list[tuple[str, int]]:
    """(module prefix, rank) of the jaxmbd layers contract, rank 0 at the bottom, longest
    prefixes first."""
    config = tomllib.loads(pyproject.read_text()).get("tool", {}).get("importlinter", {})
    for contract in config.get("contracts", []):
        if contract.get("type") == "layers" and contract.get("containers") == ["jaxmbd"]:
            out = []
            for rank, layer in enumerate(reversed(contract["layers"])):
                out += [(f"jaxmbd.{name}", rank) for name in layer.replace("|", " ").split()]
            return sorted(out, key=lambda item: -len(item[0]))
    return []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="pyproject.toml", type=pathlib.Path)
    args = parser.parse_args(argv)
    ranks = layer_ranks(args.layers)

    def rank(module: str):
        return next((r for name, r in ranks if module == name or module.startswith(name + ".")),
                    None)  # fmt: skip

    stops: list[str] = []
    upward: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("jaxmbd"):
            return
        code = frame.f_code
        for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
            if name != "self" and isinstance(frame.f_locals.get(name), Model):
                if not stops or stops[-1] != module:
                    stops.append(module)
                caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
                low, high = rank(caller), rank(module)
                if caller.startswith("jaxmbd") and None not in (low, high) and high > low:
                    upward[(caller, module)] += 1
                return

    model = mbd.models.double_pendulum()
    sys.setprofile(profile)
    mbd.simulate(model, t_end=0.01, h=1e-3)
    sys.setprofile(None)
    left, returns = set(), 0
    for k, module in enumerate(stops):
        returns += module in left
        if k:
            left.add(stops[k - 1])
    print(f"modules: {len(set(stops))}, stops: {len(stops)}, returns to a module left: {returns}")
    print(f"calls from a lower layer to a higher one: {sum(upward.values())} {dict(upward)}")
    print(" -> ".join(module.removeprefix("jaxmbd.") for module in stops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
