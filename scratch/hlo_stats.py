"""Per-computation statistics of an optimized HLO text: for each while loop, its body's
top-level instructions by opcode, and the fusions' root shapes."""
import re, sys, collections
text = open(sys.argv[1]).read()
comps = {}
cur = None
for line in text.splitlines():
    m = re.match(r"^(ENTRY )?%(\S+) .*\{$", line)
    if m:
        cur = m.group(2); comps[cur] = []; continue
    if line.startswith("}"):
        cur = None; continue
    if cur is not None and line.strip():
        comps[cur].append(line.strip())
def op_of(ins):
    m = re.match(r"(ROOT )?%\S+ = (.+?) ([a-z][a-z0-9-]*)\(", ins)
    return (m.group(3), m.group(2)) if m else (None, None)
bodies = []
for name, ins in comps.items():
    for i in ins:
        if " while(" in i:
            b = re.search(r"body=%(\S+?)[,\s]", i).group(1)
            bodies.append((name, b))
for parent, b in bodies:
    ins = comps[b]
    ops = collections.Counter(op_of(i)[0] for i in ins)
    print(f"== while body {b} (in {parent}): {len(ins)} instructions")
    print("   ", dict(ops.most_common()))
    shapes = collections.Counter()
    for i in ins:
        op, shape = op_of(i)
        if op in ("fusion", "transpose", "copy", "gather", "scatter", "dynamic-update-slice", "concatenate"):
            kind = re.search(r"calls=%(\S+?)[,\s]", i)
            inner = ""
            if kind:
                inner_ops = collections.Counter(op_of(x)[0] for x in comps.get(kind.group(1), []))
                inner = ",".join(k for k in ("transpose", "gather", "scatter", "dot", "sine", "cosine", "reduce", "copy", "dynamic-update-slice", "concatenate") if inner_ops.get(k))
            shapes[(op, shape.split("{")[0], inner)] += 1
    for (op, shape, inner), k in sorted(shapes.items(), key=lambda kv: -kv[1])[:60]:
        print(f"    {k:3d} {op:10s} {shape:30s} {inner}")
import math
for parent, b in bodies:
    tot = 0; n = 0
    for i in comps[b]:
        op, shape = op_of(i)
        if op in ("fusion", "copy", "transpose") and shape and shape.startswith("f64["):
            dims = [int(d) for d in shape[4:shape.index("]")].split(",") if d]
            tot += math.prod(dims); n += 1
    print(b[:40], "fusions+copies", n, "output elements", tot)
