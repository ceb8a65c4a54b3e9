#!/usr/bin/env bash
# On the two-H200 machine: `pkagent search` over all_reduce (configs/search/kernels_lib_gpu.yaml)
# with the scripted model of scripted_model.py, whose kernels (kernels/) are kernels_lib's
# reference kernels and slower variants: NCCL plus a wasted all-reduce, NCCL itself, the one-shot
# and the two-shot kernel, and one that is the two-shot kernel only in its first check. Samples
# from scratch get the slow one or the fast-once one; a refinement gets the next rung of the
# ladder. The search should end with two_shot as best and fast_once ranked by its slow re-check.
# Writes the search to $OUT_DIR (default runs/search/kernels_lib); RECORD=1 also copies its
# leaderboard, plot, best kernel and each sample's kernel and lineage into run/ next to this file
# (the committed example).
#   bash examples/search_kernels_lib/run.sh [more pkagent search arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT_DIR:-runs/search/kernels_lib}
${PYTHON:-python} examples/search_kernels_lib/scripted_model.py --kernels examples/search_kernels_lib/kernels \
  --out "$out" --fast-checks 1 -- --config kernels_lib_gpu "$@"
if [ "${RECORD:-0}" = 1 ]; then
  rec=examples/search_kernels_lib/run
  mkdir -p "$rec"/best
  cp "$out"/leaderboard.json "$out"/leaderboard.txt "$out"/progress.png "$out"/scripted_requests.json "$rec"/
  cp "$out"/best/solution.py "$out"/best/result.json "$rec"/best/
  rm -rf "$rec"/samples
  for s in "$out"/samples/sample_*; do
    mkdir -p "$rec"/samples/"${s##*/}" && cp "$s"/solution.py "$s"/lineage.json "$rec"/samples/"${s##*/}"/
  done
fi
cat "$out"/leaderboard.txt
