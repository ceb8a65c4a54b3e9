#!/usr/bin/env bash
# The GPU sweep of the checker, the suite, kernels_lib's kernels through the checker and the
# sandbox, in one call on a machine with 2+ GPUs. Stages (STAGES, default all but speed):
#   doctor   pkagent doctor, table and JSON
#   tests    tests/test_check_gpu.py (tricks, side streams, a deadlock then a clean check)
#   kernels  every kernels_lib/examples kernel through `pkagent check --perf`
#   sandbox  a 2-GPU check inside the local sandbox, without and with bubblewrap
#   sandbox_kill  SIGKILL/SIGTERM of `pkagent sandbox run` while the check inside it hangs on
#            the GPUs (tests/candidates/deadlock.py): seconds until nvidia-smi shows no process
#   table    benchmarks/reference_table.py: every problem's reference against itself
#   speed    benchmarks/check_speed.py
#   adversarial  tests/test_check_adversarial.py on the GPUs (PKAGENT_TEST_DEVICE=cuda)
#   repro    benchmarks/check_repro.py: the four collectives' references 3x at REPRO_SIZES (1 and
#            0.001), kernels_lib's kernels 3x at REPRO_KERNEL_SIZES (1 and 0.001); REPRO_ARGS adds
#            arguments to both (e.g. --graphs off)
#   bench    kernels_lib/gpu_sweep.sh: kernels_lib's GPU checks and `pkagent bench-lib`, into $OUT/bench
#   one_gpu  what one GPU can show (world size 1, the collectives as the identity): the CUDA-graph
#            candidates through the checker, then check_repro's references (graphs auto, then off)
#            and kernels_lib's kernels
#   signals  SIGTERM, then SIGKILL, of a `pkagent check` whose candidate hangs: nvidia-smi must
#            list no process on the GPUs 5 s later
#   agent    examples/all_reduce_gpu/run.sh: a replayed agent run through sandbox and checker
#   runs     examples/report_kernels_lib/run.sh: pkagent run + report over kernels_lib's kernels
#   search   examples/search_kernels_lib/run.sh: pkagent search with a scripted model over
#            kernels_lib's kernels and slower variants; the search folder comes back as search.tgz
#   pkb      examples/pkb_all_reduce_gpu/run.sh on a ParallelKernelBench checkout carried in
#            third_party/ParallelKernelBench (git-ignored; PKB= elsewhere): a replayed agent run on
#            its all-reduce (problem 1) scored by pkagent, the generation in its folder layout
#            re-scored and reported, a multicast candidate refused; results in $OUT/pkb/
# The device image has torch, typer, rich, pyyaml, jinja2, httpx, matplotlib and pytest;
# pydantic, tenacity and anthropic's SDK travel as wheels in .whl/ and bubblewrap as a .deb in
# .debs/, both fetched by scripts/fetch_gpu_deps.sh. Logs and results go to $OUT (default ./gpu_out).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
WORLD=${WORLD:-2}
STAGES=${STAGES:-doctor tests kernels sandbox table}
export PKAGENT_CACHE=/tmp/pkagent-cache PKAGENT_KERNEL_CACHE=/tmp/pkagent-kernels
if ls .whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || exit 1; fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 || export PYTHONPATH=$PWD
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
if ! command -v bwrap >/dev/null && ls .debs/*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/bw && for d in .debs/*.deb; do dpkg -x "$d" /tmp/bw; done; export PATH=/tmp/bw/usr/bin:$PATH
fi
gpu_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr -d ' '; }
gpu_count() { gpu_pids | grep -c .; }
sandbox_kill() {  # the keeper ends a sandboxed check's rank processes when its owner dies
  for iso in none bwrap; do
    for sig in KILL TERM; do
      w=$(mktemp -d); cp tests/candidates/deadlock.py "$w/solution.py"
      pkagent sandbox run --workdir "$w" --isolation "$iso" --gpus "$WORLD" --timeout 600 -- \
        pkagent check solution.py --problem all_reduce --world-size "$WORLD" --timeout 600 > "$OUT/sandbox_kill_${iso}_${sig}.log" 2>&1 &
      pid=$!; t=0
      while [ "$(gpu_count)" -lt "$WORLD" ] && [ $t -lt 1200 ]; do sleep 0.1; t=$((t + 1)); done
      sleep 3; before=$(gpu_count); start=$EPOCHREALTIME; kill -$sig $pid; wait $pid; rc=$?
      since() { awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
      while [ "$(gpu_count)" -gt 0 ] && awk -v s="$(since)" 'BEGIN { exit !(s < 30) }'; do sleep 0.1; done
      echo "-- isolation $iso, SIG$sig: $before GPU processes before; exit $rc; $(gpu_count) left after $(since) s"
      nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
    done
  done
}
{
  echo "== $(date -u) $(hostname)"; nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
  if has doctor; then nvidia-smi topo -m; echo "== doctor"; pkagent doctor; pkagent doctor --json > "$OUT/doctor.json"; fi
  if has tests; then echo "== GPU checker tests"; python3 -m pytest -q -p no:cacheprovider tests/test_check_gpu.py 2>&1 | tail -30; fi
  if has kernels; then
    echo "== kernels_lib reference kernels through the checker"
    for pair in all_reduce:all_reduce all_reduce_one_shot:all_reduce all_reduce_two_shot:all_reduce all_gather:all_gather reduce_scatter:reduce_scatter \
                all_to_all:all_to_all ag_gemm:ag_gemm gemm_rs:gemm_rs; do
      f=${pair%%:*}; p=${pair#*:}
      pkagent check "kernels_lib/examples/$f.py" --problem "$p" --world-size "$WORLD" --perf --timeout 120 > /tmp/k_$f.log 2>&1
      echo "-- $f ($p): exit $?"; grep -E "^status|^  (reference|candidate|speedup|roofline|wall)" /tmp/k_$f.log
      tail -1 /tmp/k_$f.log >> "$OUT/kernels_checks.jsonl"
    done
  fi
  if has sandbox; then
    echo "== 2-GPU check inside the local sandbox"
    w=$(mktemp -d); cp kernels_lib/examples/all_reduce_two_shot.py "$w/solution.py"
    pkagent sandbox run --workdir "$w" --gpus "$WORLD" --timeout 300 -- pkagent check solution.py --problem all_reduce --world-size "$WORLD" --perf 2>&1 | grep -vE '^\{' | tail -12
    echo "exit ${PIPESTATUS[0]}"
    if command -v bwrap >/dev/null; then
      echo "-- with bubblewrap ($(bwrap --version 2>&1))"
      pkagent sandbox run --workdir "$w" --isolation bwrap --gpus "$WORLD" --timeout 300 -- pkagent check solution.py --problem all_reduce --world-size "$WORLD" --perf 2>&1 | grep -vE '^\{' | tail -12
      echo "exit ${PIPESTATUS[0]}"
    fi
  fi
  if has sandbox_kill; then echo "== SIGKILL/SIGTERM of a sandboxed check hung on the GPUs"; sandbox_kill; fi
  if has agent; then
    echo "== replayed agent run on the GPUs"
    OUT_DIR="$OUT/all_reduce_gpu" bash examples/all_reduce_gpu/run.sh 2>&1 | tail -20
  fi
  if has runs; then
    echo "== pkagent run + report over kernels_lib's kernels"
    RUN_DIR=/tmp/pkruns REPORT_DIR="$OUT/report" bash examples/report_kernels_lib/run.sh 2>&1 | tail -40
  fi
  if has search; then
    echo "== pkagent search over kernels_lib's kernels (scripted model)"
    rm -rf /tmp/search; OUT_DIR=/tmp/search bash examples/search_kernels_lib/run.sh 2>&1 | tail -40
    tar -czf "$OUT/search.tgz" -C /tmp search
  fi
  if has pkb; then
    echo "== ParallelKernelBench's all-reduce: a replayed agent run, its generation re-scored, a multicast refusal"
    rm -rf /tmp/pkb_gpu; OUT_DIR=/tmp/pkb_gpu bash examples/pkb_all_reduce_gpu/run.sh 2>&1 | tail -80
    mkdir -p "$OUT/pkb" && cp examples/pkb_all_reduce_gpu/run/* "$OUT/pkb/" 2>/dev/null; ls "$OUT/pkb"
  fi
  if has adversarial; then
    echo "== the adversarial set on the GPUs (bubblewrap: $(command -v bwrap || echo none))"
    PKAGENT_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider -rA tests/test_check_adversarial.py 2>&1 | grep -E "^(PASSED|FAILED|SKIPPED|ERROR)|passed|failed" | tail -40
  fi
  if has repro; then
    echo "== reproducibility of the speedups"
    python3 benchmarks/check_repro.py --runs 3 --sizes ${REPRO_SIZES:-1 0.001} --out "$OUT/check_repro_w$WORLD.md" ${REPRO_ARGS:-}
    python3 benchmarks/check_repro.py --runs 3 --sizes ${REPRO_KERNEL_SIZES:-1 0.001} --kernels --only kernels_lib \
      --out "$OUT/check_repro_kernels_w$WORLD.md" ${REPRO_ARGS:-}
  fi
  if has one_gpu; then
    echo "== one GPU: the checker's CUDA-graph path and the host's share of the spread"
    python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from check_repro import one_rank
one_rank()
from eval.check import check
for name, graphs in [("honest", "auto"), ("not_capturable", "on"), ("stale_when_captured", "on"), ("stale_after_replays", "on")]:
    r = check(f"tests/candidates/{name}.py", "all_reduce", world_size=1, device="cuda", size=0.001, trials=3, perf=True, graphs=graphs)
    p = r.perf
    print(f"{name}: {r.status} {r.message[:160]!r}", "" if p is None else f"graphs {p.graphs} {p.graphs_note[:160]!r} speedup {p.speedup:.3f}")
PY
    python3 benchmarks/check_repro.py --world-size 1 --runs 3 --sizes 0.001 1 --out "$OUT/repro_w1_auto.md"
    python3 benchmarks/check_repro.py --world-size 1 --runs 3 --sizes 0.001 --graphs off --out "$OUT/repro_w1_off.md"
    python3 benchmarks/check_repro.py --world-size 1 --runs 3 --sizes 0.001 --kernels --only kernels_lib --out "$OUT/repro_kernels_w1.md"
  fi
  if has bench; then echo "== kernels_lib: GPU checks and bench"; OUT="$OUT/bench" bash kernels_lib/gpu_sweep.sh 2>&1 | tail -60; fi
  if has signals; then
    echo "== a check ended by a signal while its candidate hangs"
    for sig in TERM KILL; do
      pkagent check tests/candidates/escapes_and_hangs.py --problem all_reduce --world-size "$WORLD" --timeout 600 > /tmp/sig.log 2>&1 &
      pid=$!
      for _ in $(seq 1 120); do [ "$(gpu_pids | wc -l)" -ge $((2 * WORLD)) ] && break; sleep 0.5; done
      echo "-- before SIG$sig: $(gpu_pids | wc -l) processes on the GPUs: $(gpu_pids | tr '\n' ' ')"
      kill -$sig $pid; t0=$(date +%s%N)
      ms() { echo $(( ($(date +%s%N) - t0) / 1000000 )); }
      while [ -n "$(gpu_pids)" ] && [ "$(ms)" -lt 5000 ]; do sleep 0.1; done
      left=$(gpu_pids | wc -l); echo "-- SIG$sig: $left processes on the GPUs $(ms) ms after the signal"
      wait $pid 2>/dev/null; echo "   pkagent check exit $?; leftover folders: $(ls -d /tmp/pkagent-check-* 2>/dev/null | wc -l)"
      sleep 2
    done
  fi
  if has table; then echo "== reference table"; python3 benchmarks/reference_table.py --world-size "$WORLD" ${TABLE_ARGS:-} --out "$OUT/reference_roofline_w$WORLD.md"; fi
  if has speed; then echo "== check speed"; python3 benchmarks/check_speed.py --world-size "$WORLD" --out "$OUT/check_speed.json"; fi
  echo "== end $(date -u)"
} 2>&1 | tee "$OUT/sweep.log"
