#!/usr/bin/env bash
# The checker's GPU sweep, in one call on a machine with 2+ GPUs (the device image has torch,
# typer, rich, pyyaml and pytest; pydantic travels as wheels in .whl/):
#   doctor, the GPU checker tests (tricks, side streams, deadlock then a clean check),
#   benchmarks/check_speed.py, and benchmarks/reference_table.py.
# Logs and results go to $OUT (default ./gpu_out).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
WORLD=${WORLD:-2}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PKAGENT_CACHE=/tmp/pkagent-cache
{
  echo "== $(date -u) $(hostname)"; nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
  nvidia-smi topo -m
  echo "== doctor"; python3 -m pkagent doctor; python3 -m pkagent doctor --json > "$OUT/doctor.json"
  if [ "${SKIP_TESTS:-0}" != 1 ]; then
    echo "== GPU checker tests"; python3 -m pytest -q -p no:cacheprovider tests/test_check_gpu.py -x 2>&1 | tail -30
  fi
  if [ "${SKIP_SPEED:-0}" != 1 ]; then
    echo "== check speed"; python3 benchmarks/check_speed.py --world-size "$WORLD" --out "$OUT/check_speed.json"
  fi
  echo "== reference table"; python3 benchmarks/reference_table.py --world-size "$WORLD" ${TABLE_ARGS:-} --out "$OUT/reference_roofline_w$WORLD.md"
  echo "== end $(date -u)"
} 2>&1 | tee "$OUT/sweep.log"
