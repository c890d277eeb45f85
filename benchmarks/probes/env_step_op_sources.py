"""Where the lowered env step's StableHLO ops come from: op counts by jaxmbd source line."""

import collections
import re
import sys

import jax
import jax.numpy as jnp

from jaxmbd import envs

env = envs.make(sys.argv[1], sys.argv[2])
s = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
a = jnp.zeros(env.action_size)
txt = jax.jit(env.step).lower(s, a).as_text(debug_info=True)
locs = dict(re.findall(r"^(#loc\d+) = (.*)$", txt, re.M))


def resolve(ref, depth=0):
    v = locs.get(ref, ref)
    return v


by_file = collections.Counter()
by_line = collections.Counter()
for m in re.finditer(r"= stablehlo\.\w+.*loc\((#loc\d+)\)", txt):
    v = resolve(m.group(1))
    frames = re.findall(r'"([^"]*jaxmbd/[^"]+)":(\d+)', v)
    # follow callsite refs
    seen = 0
    refs = re.findall(r"#loc\d+", v)
    stack = list(refs)
    while stack and seen < 50:
        r = stack.pop()
        seen += 1
        vv = locs.get(r, "")
        frames += re.findall(r'"([^"]*jaxmbd/[^"]+)":(\d+)', vv)
        stack += re.findall(r"#loc\d+", vv)
    for f, l in set(frames):
        by_file[f.split("jaxmbd/")[-1]] += 1
        by_line[f.split("jaxmbd/")[-1] + ":" + l] += 1
print("total ops", len(re.findall(r"= stablehlo\.", txt)))
for k, v in by_file.most_common(30):
    print(v, k)
print("---")
for k, v in by_line.most_common(40):
    print(v, k)
