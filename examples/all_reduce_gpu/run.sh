#!/usr/bin/env bash
# On a machine with two GPUs: replay the scripted agent turns of script.jsonl through the real
# local sandbox and the trusted checker (pkagent solve), writing transcript.jsonl, solution.py
# and result.json to $OUT_DIR (default runs/examples/all_reduce_gpu; RECORD=1: run/ next to this
# file, the committed example).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT_DIR:-runs/examples/all_reduce_gpu}
if [ "${RECORD:-0}" = 1 ]; then out=examples/all_reduce_gpu/run; fi
pkagent solve --problem all_reduce --model replay:examples/all_reduce_gpu/script.jsonl --device cuda --world-size 2 \
  --out "$out" check.perf=true
