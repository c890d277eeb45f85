#!/usr/bin/env bash
# The checks to run on a machine with a GPU (its image has jax with the CUDA plugin;
# nothing is installed: jaxmbd runs from the checkout). Run from the repository root:
#
#     OUT=DIR bash benchmarks/gpu_check.sh
#
# 1. exact contact, the KKT and Newton solves, batches and gradients:
#    their test files, slow tests included, on the GPU (the CPU-only hoisting tests
#    deselected or skipped: XLA's small-loop hoisting is a CPU pass); ~5 min on an H100;
# 2. python -m benchmarks.hard_contact batch: hard contact in batches, checked per member;
# 3. python -m benchmarks.batch, double pendulum gen_alpha and rkmk: the GPU path of the
#    Newton and KKT solves against the H100 run in results/batch/gpu (e05c2d6).
# Each part has its own time limit so that one slow part leaves the others their turn.
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# several test workers share the GPU: no worker takes 75 % of its memory up front
export XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY -c "import jax; print('jax', jax.__version__, jax.devices())"

# the CPU-written tests that touch the solves, batches and gradients (slow ones included);
# the hoisting tests skip themselves off the CPU
timeout "${TESTS_S:-330}" $PY -m pytest tests/test_hard_contact.py tests/test_schur.py \
    tests/test_small_solve.py tests/test_small_structured.py tests/test_newton.py \
    tests/test_batch.py tests/test_batch_control.py tests/test_gradients.py \
    tests/test_integrators.py tests/test_compile_once.py tests/test_config.py \
    -o addopts="" -m "slow or not slow" -k "not hoisted" -n 14 -q -p no:cacheprovider \
    -p no:benchmark --durations=12 2>&1 | tee "$OUT/tests.log" | grep -v Warning
echo "tests: exit ${PIPESTATUS[0]}"

timeout "${BATCH_S:-110}" $PY -m benchmarks.hard_contact batch --sizes 1 256 4096 \
    --repeats 3 --grad-size 1024 --out "$OUT" 2>&1 | tail -12
echo "hard_contact_batch: exit ${PIPESTATUS[0]}"

timeout "${BENCH_S:-110}" $PY -m benchmarks.batch --skip-mujoco --devices 1 \
    --mechanisms double_pendulum --integrators gen_alpha rkmk --sizes 1 4096 16384 \
    --repeats 2 --out "$OUT/bench_batch" 2>&1 | tail -12
echo "bench_batch: exit ${PIPESTATUS[0]}"
