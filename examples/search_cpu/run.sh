#!/usr/bin/env bash
# No GPU, no API key: `pkagent search` over all_reduce on CPU (configs/search/cpu_demo.yaml) with
# the scripted model of examples/search_kernels_lib/scripted_model.py, whose kernels (kernels/)
# are the reference plus deliberate sleeps of 64, 32 and 8 ms, and one that sleeps only after
# its first two checks. Writes the search to $OUT_DIR (default runs/search/cpu_demo).
# RECORD=1 also copies its leaderboard, plot and best kernel into run/ next to this file (the
# committed example).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT_DIR:-runs/search/cpu_demo}
${PYTHON:-python} examples/search_kernels_lib/scripted_model.py --kernels examples/search_cpu/kernels \
  --out "$out" --fast-checks 2 -- --config cpu_demo "$@"
if [ "${RECORD:-0}" = 1 ]; then
  mkdir -p examples/search_cpu/run/best
  cp "$out"/leaderboard.json "$out"/leaderboard.txt "$out"/progress.png "$out"/scripted_requests.json examples/search_cpu/run/
  cp "$out"/best/solution.py "$out"/best/result.json examples/search_cpu/run/best/
fi
echo "search: $out"
