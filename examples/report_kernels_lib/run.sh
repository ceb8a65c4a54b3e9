#!/usr/bin/env bash
# On the two-H200 machine: score kernels_lib's reference kernels and the broken variants in
# generations/ (configs/experiments/kernels_lib_gpu.yaml), then write the report next to this file.
#   bash examples/report_kernels_lib/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
run_dir=${RUN_DIR:-runs}
pkagent run kernels_lib_gpu run_dir="$run_dir" "$@"
pkagent report "$run_dir/kernels_lib_gpu" --html --csv --json --out examples/report_kernels_lib >/dev/null
pkagent report "$run_dir/kernels_lib_gpu"
