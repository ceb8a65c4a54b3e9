#!/usr/bin/env bash
# On the two-H200 machine: `pkagent search` over all_reduce (configs/search/kernels_lib_gpu.yaml)
# with the scripted model of scripted_model.py, whose kernels (kernels/) are kernels_lib's
# reference kernels and slower variants: NCCL plus a wasted all-reduce, NCCL itself, the one-shot
# and the two-shot kernel, and one that is the two-shot kernel only in its first check. Samples
# from scratch get the slow one or the fast-once one; a refinement gets the next rung of the
# ladder. The search should end with two_shot as best and fast_once ranked by its slow re-check.
# Writes the search to $OUT_DIR (default runs/search/kernels_lib) and copies its leaderboard,
# plot, best kernel and each sample's kernel and lineage next to this file.
#   bash examples/search_kernels_lib/run.sh [more pkagent search arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT_DIR:-runs/search/kernels_lib}
${PYTHON:-python} examples/search_kernels_lib/scripted_model.py --kernels examples/search_kernels_lib/kernels \
  --out "$out" --fast-checks 1 -- --config kernels_lib_gpu "$@"
mkdir -p examples/search_kernels_lib/run/best
cp "$out"/leaderboard.json "$out"/leaderboard.txt "$out"/progress.png "$out"/scripted_requests.json examples/search_kernels_lib/run/
cp "$out"/best/solution.py "$out"/best/result.json examples/search_kernels_lib/run/best/
rm -rf examples/search_kernels_lib/run/samples
for s in "$out"/samples/sample_*; do
  mkdir -p examples/search_kernels_lib/run/samples/"${s##*/}" && cp "$s"/solution.py "$s"/lineage.json examples/search_kernels_lib/run/samples/"${s##*/}"/
done
cat examples/search_kernels_lib/run/leaderboard.txt
