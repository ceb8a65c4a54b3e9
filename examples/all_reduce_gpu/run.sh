#!/usr/bin/env bash
# On a machine with two GPUs: replay the scripted agent turns of script.jsonl through the real
# local sandbox and the trusted checker (pkagent solve), writing transcript.jsonl, solution.py
# and result.json next to this file.
set -euo pipefail
cd "$(dirname "$0")/../.."
pkagent solve --problem all_reduce --model replay:examples/all_reduce_gpu/script.jsonl --device cuda --world-size 2 \
  --out "${OUT_DIR:-examples/all_reduce_gpu/run}" check.perf=true
