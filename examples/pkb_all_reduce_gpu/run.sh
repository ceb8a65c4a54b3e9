#!/usr/bin/env bash
# On a machine with two GPUs and a ParallelKernelBench checkout (PKB, default
# third_party/ParallelKernelBench, git-ignored): replay the scripted agent turns of script.jsonl
# on its problem 1 (all-reduce) through the real local sandbox and the trusted checker
# (pkagent solve --suite pkb:PKB), score the generation it wrote in that benchmark's folder
# layout again as an experiment (folder:), report it, and show that a candidate mentioning
# multicast is refused before it runs. Everything goes to OUT_DIR (default
# runs/pkb_all_reduce_gpu); the results without the checkout's text (no transcript, no work
# directory: both hold its reference) are copied to examples/pkb_all_reduce_gpu/run/.
# DEVICE=cpu is a dry run of the commands (the kernel needs CUDA, so its checks fail).
set -uo pipefail
cd "$(dirname "$0")/../.."
pkb=${PKB:-third_party/ParallelKernelBench}
out=${OUT_DIR:-runs/pkb_all_reduce_gpu}
device=${DEVICE:-cuda}
[ -d "$pkb/reference" ] || { echo "no ParallelKernelBench checkout at $pkb (set PKB)"; exit 2; }
rm -rf "$out"; mkdir -p "$out"
echo "-- pkagent solve (replayed agent) on $pkb problem 1"
pkagent solve --suite "pkb:$pkb" --problem 1 --model replay:examples/pkb_all_reduce_gpu/script.jsonl \
  --device "$device" --world-size 2 --out "$out/solve" check.perf=true
echo "solve exit $?"
gen=$(ls -d "$out"/solve/solutions_*)
echo "-- its generation in that benchmark's layout: $gen/$(ls "$gen")"
echo "-- pkagent run: the same generation scored again from folder:$gen"
pkagent run pkb name=pkb_folder run_dir="$out/runs" "problems=[pkb:$pkb::1]" "models=[folder:$gen]" modes=[agent] samples=1 \
  device="$device" -q
echo "run exit $?"
COLUMNS=160 pkagent report "$out/runs/pkb_folder" --csv
echo "-- a candidate that mentions multicast"
printf 'import torch\n\n\ndef solution(tensor):\n    return tensor.clone()  # multimem.ld_reduce would go here\n' > "$out/multicast.py"
pkagent check "$out/multicast.py" --problem 1 --suite "pkb:$pkb" --world-size 2 --device "$device" --json > "$out/multicast.json"
echo "check exit $?: $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['status'], '-', r['message'])" "$out/multicast.json")"
keep=examples/pkb_all_reduce_gpu/run
rm -rf "$keep"; mkdir -p "$keep"
cp "$out/solve/result.json" "$keep/solve_result.json"
cp "$out/runs/pkb_folder/report/pkb.csv" "$out/runs/pkb_folder/report/samples.csv" "$out/multicast.json" "$keep/" 2>/dev/null
ls "$keep"
