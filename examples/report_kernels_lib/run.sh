#!/usr/bin/env bash
# On the two-H200 machine: score kernels_lib's reference kernels and the broken variants in
# generations/ (configs/experiments/kernels_lib_gpu.yaml), then write the report to $REPORT_DIR
# (default runs/kernels_lib_gpu/report); RECORD=1 writes it next to this file (the committed example).
#   bash examples/report_kernels_lib/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
run_dir=${RUN_DIR:-runs}
pkagent run kernels_lib_gpu run_dir="$run_dir" "$@"
report_dir=${REPORT_DIR:-$run_dir/kernels_lib_gpu/report}
if [ "${RECORD:-0}" = 1 ]; then report_dir=examples/report_kernels_lib; fi
pkagent report "$run_dir/kernels_lib_gpu" --html --csv --json --out "$report_dir" >/dev/null
echo "report: $report_dir/report.html"
pkagent report "$run_dir/kernels_lib_gpu"
