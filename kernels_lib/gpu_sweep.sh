#!/usr/bin/env bash
# One device call: GPU checks (build time, trap, primitives, every reference kernel) then the
# bench. Run from the repository root on a machine with 2+ GPUs; logs and results go to $OUT.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=. PYTHONUNBUFFERED=1 PKAGENT_KERNEL_CACHE=/tmp/pk_kernel_cache
OUT=${OUT:-/tmp/pk_out}; mkdir -p "$OUT"
{ nvidia-smi topo -m; python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())'; } > "$OUT/machine.txt" 2>&1
if [ "${SKIP_CHECK:-0}" != 1 ]; then
  timeout "${CHECK_TIMEOUT:-360}" python3 benchmarks/kernels_lib_gpu_check.py --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
fi
timeout "${BENCH_TIMEOUT:-300}" python3 -m kernels_lib.bench --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
# Block-count sweep of the all-reduce kernels (senders, receivers caps), summary lines only.
for cfg in ${SWEEP:-}; do
  s=${cfg%x*}; r=${cfg#*x}
  echo "== PK_MAX_SENDERS=$s PK_MAX_RECEIVERS=$r" >> "$OUT/sweep.log"
  PK_MAX_SENDERS=$s PK_MAX_RECEIVERS=$r timeout 120 python3 -m kernels_lib.bench --ops ${SWEEP_OPS:-all_reduce} --out /tmp/sweep_$cfg 2>&1 | grep '^| [a-z_]* | [0-9]' >> "$OUT/sweep.log"
done
# Environment sweep: each word of ENV_SWEEP is one configuration, comma-separated VAR=value
# settings, timed by the bench on ENV_SWEEP_OPS, e.g.
#   ENV_SWEEP="PK_AG_TILE_KIB=64 PK_AG_TILE_KIB=256 PK_ALL_GATHER=tma,PK_AG_TMA_STAGES=2,PK_AG_TMA_CHUNK_KIB=64" ENV_SWEEP_OPS=all_gather
# Knobs: PK_AG_TILE_KIB, PK_AG_TMA_STAGES, PK_AG_TMA_CHUNK_KIB, PK_ALL_GATHER (all_gather);
# PK_AR_TWO_SHOT_BYTES (all_reduce by size); PK_MAX_GATHERERS (two-shot); PK_REDUCE_SCATTER;
# PK_GEMM_RS_CHUNKS (gemm_rs); PK_MAX_SENDERS, PK_MAX_RECEIVERS (all of the push kernels).
for cfg in ${ENV_SWEEP:-}; do
  echo "== $cfg" >> "$OUT/sweep.log"
  env ${cfg//,/ } timeout 120 python3 -m kernels_lib.bench --ops ${ENV_SWEEP_OPS:-all_gather} --out "/tmp/sweep_env_${cfg//[^A-Za-z0-9]/_}" 2>&1 | grep '^| [a-z_]* | [0-9]' >> "$OUT/sweep.log"
done
