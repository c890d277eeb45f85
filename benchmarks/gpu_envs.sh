#!/usr/bin/env bash
# Env-steps per second of the training environments on a GPU, jaxmbd's against MuJoCo
# Playground's (MJX), as benchmarks/rl/throughput.py measures them: one row
# (backend, task, batch) per process (`python -m benchmarks.rl.throughput --one ...`),
# jaxmbd then Playground for each (task, batch), both in float64; `playground-f32` rows are
# Playground in float32, its native precision (--playground-float32). Run from the
# repository root:
#
#     OUT=DIR bash benchmarks/gpu_envs.sh
#
# What the machine lacks travels beside the checkout, ignored by git (.git/info/exclude):
# .whl/ (wheels: mujoco, mujoco-core, mujoco-mjx, playground, brax, jaxopt, ml_collections,
# trimesh; installed into /tmp/site here) and .gpu_assets/dm_control/ (dm_control's suite
# XML files, where jaxmbd.envs looks for them: not the package). jaxmbd runs from the
# checkout. Rows run in the order of ROWS, the most wanted first; each has its own time
# limit (ROW_S, cut to what is left of TOTAL_S, counted from the script's start), and no row
# starts with less than MIN_ROW_S left: the rest are written as skipped. Every row, measured,
# failed, timed out or skipped, is one JSON line of $OUT/throughput_gpu.jsonl; each
# process's output is in $OUT/logs/. No persistent compilation cache on either side: each
# row's compile_s is a cold compile.
set -u
OUT=${OUT:-/tmp/gpu_envs}
mkdir -p "$OUT/logs"
PY=${PY:-python3}
TOTAL_S=${TOTAL_S:-405}   # the whole script, installs included
ROW_S=${ROW_S:-240}       # one row at most (jaxmbd's humanoid compiles for minutes)
MIN_ROW_S=${MIN_ROW_S:-45}
STEPS=${STEPS:-100}
REPEATS=${REPEATS:-3}
# task batch backend (jaxmbd, playground, playground-f32), one row a line, in this order
ROWS=${ROWS:-"
cheetah-run 2048 jaxmbd
cheetah-run 2048 playground
cheetah-run 8192 jaxmbd
cheetah-run 8192 playground
cheetah-run 8192 playground-f32
cheetah-run 256 jaxmbd
cheetah-run 256 playground
cheetah-run 1 jaxmbd
cheetah-run 1 playground
humanoid-stand 2048 jaxmbd
humanoid-stand 2048 playground
humanoid-stand 8192 jaxmbd
humanoid-stand 8192 playground
humanoid-stand 256 jaxmbd
humanoid-stand 256 playground
humanoid-stand 1 jaxmbd
humanoid-stand 1 playground
humanoid-stand 8192 playground-f32
"}

if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
else
    echo "no nvidia-smi"
fi
export PYTHONPATH=$PWD:/tmp/site:$PWD/.gpu_assets${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false JAXMBD_NO_COMPILATION_CACHE=1

if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
fi
$PY - <<'EOF'
import importlib.metadata as md
import jax
print("jax", jax.__version__, jax.devices())
print({p: md.version(p) for p in ("jaxlib", "mujoco", "mujoco-mjx", "playground", "brax",
                                  "flax", "numpy")})
EOF

JSONL=$OUT/throughput_gpu.jsonl
echo "rows: $(echo "$ROWS" | grep -c .), steps $STEPS, repeats $REPEATS, ${TOTAL_S} s in all"
while read -r task batch backend; do
    [ -z "${task:-}" ] && continue
    flags=()
    [ "$backend" = playground-f32 ] && flags=(--playground-float32)
    name=${backend%-f32}
    left=$((TOTAL_S - SECONDS))
    if [ "$left" -lt "$MIN_ROW_S" ]; then
        echo "{\"backend\": \"$name\", \"task\": \"$task\", \"batch\": $batch," \
            "\"variant\": \"$backend\", \"skipped\": \"${left} s left\"}" >>"$JSONL"
        echo "$task $batch $backend: skipped (${left} s left)"
        continue
    fi
    limit=$((left < ROW_S ? left : ROW_S))
    log=$OUT/logs/${task}_${batch}_${backend}
    start=$SECONDS
    timeout -k 5 "$limit" $PY -m benchmarks.rl.throughput --one "$name" "$task" "$batch" \
        --steps "$STEPS" --repeats "$REPEATS" "${flags[@]}" >"$log.out" 2>"$log.err"
    rc=$?
    $PY - "$log" "$rc" "$((SECONDS - start))" "$limit" "$task" "$batch" "$name" "$backend" \
        >>"$JSONL" <<'EOF'
import json, sys
log, rc, wall, limit, task, batch, name, variant = sys.argv[1:]
try:
    row = json.loads(open(log + ".out").read().strip().splitlines()[-1])
except (IndexError, ValueError):
    err = open(log + ".err").read().strip().splitlines()
    why = f"timed out at {limit} s" if rc in ("124", "137") else f"exit {rc}"
    row = {"backend": name, "task": task, "batch": int(batch), "error": why,
           "stderr": err[-3:]}
row.update(variant=variant, wall_s=int(wall))
print(json.dumps(row))
EOF
    tail -n1 "$JSONL"
done <<<"$ROWS"

# the table, and jaxmbd's rate over Playground's (float64) per (task, batch)
$PY - "$JSONL" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{'task':15} {'batch':>6} {'variant':15} {'steps/s':>12} {'compile s':>9} {'wall s':>6}")
rate = {}
for r in rows:
    if "steps_per_s" in r:
        rate[r["task"], r["batch"], r["variant"]] = r["steps_per_s"]
        print(f"{r['task']:15} {r['batch']:>6} {r['variant']:15} {r['steps_per_s']:>12,.0f} "
              f"{r['compile_s']:>9.1f} {r['wall_s']:>6}")
    else:
        print(f"{r['task']:15} {r['batch']:>6} {r['variant']:15} "
              f"{r.get('error') or 'skipped: ' + r['skipped']}")
for (task, batch, variant), v in rate.items():
    if variant == "jaxmbd" and (task, batch, "playground") in rate:
        print(f"{task} {batch}: jaxmbd / playground = {v / rate[task, batch, 'playground']:.3g}")
EOF
echo "total ${SECONDS} s"
