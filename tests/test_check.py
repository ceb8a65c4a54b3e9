"""The checker end to end on CPU (gloo): honest candidates pass, and every known trick and
failure gets the status it deserves. The same candidates run on GPU in tests/test_check_gpu.py."""

import json
import subprocess
import sys
from pathlib import Path

import deadlines
import pytest

from eval.check import UsageError, check

CANDIDATES = Path(__file__).parent / "candidates"
SMALL = dict(world_size=2, device="cpu", size=1 / 1024, trials=3, timeout=deadlines.scaled(60))


def run(name, **kw):
    return check(CANDIDATES / f"{name}.py", "all_reduce", **{**SMALL, **kw})


def test_honest_candidate_is_correct_with_perf():
    r = run("honest", perf=True)
    assert r.status == "correct", r.message + r.log_tail
    assert r.trials_passed == 3 and all(d.ok for d in r.ranks)
    assert r.collectives == {"all_reduce": 3}
    assert r.perf.reference.median_ms > 0 and r.perf.candidate.median_ms > 0
    lo, hi = r.perf.speedup_ci
    assert lo <= r.perf.speedup <= hi and r.perf.pairs >= 10
    assert r.perf.verified_calls == r.perf.pairs  # one timed call of every candidate batch checked
    assert r.confinement in ("bwrap", "none")
    assert r.perf.roofline_ms is None  # no roofline for CPU runs
    assert not r.perf.graphs and r.perf.graphs_note == "not on CUDA"  # graphs exist on CUDA only
    assert r.phases.total_s >= r.phases.startup_s > 0


@pytest.mark.parametrize(
    "name, status, words",
    [
        ("cached_outputs", "incorrect", "trial 1"),
        ("freed_memory", "incorrect", "out of tolerance"),
        ("modifies_inputs", "incorrect", "changed its inputs"),
        ("wrong_on_one_rank", "incorrect", "rank 1"),
        ("nan_output", "incorrect", "first at [0]"),
        ("wrong_dtype", "incorrect", "dtype torch.float32, expected torch.bfloat16"),
        ("tampers", "incorrect", "out of tolerance"),
        ("kills_itself", "runtime_error", "SIGKILL"),
        ("raises", "runtime_error", "illegal memory access"),
        ("syntax_error", "compile_error", "syntax error at line 1"),
        ("import_error", "import_error", "this_module_does_not_exist"),
        ("no_solution", "import_error", "no function solution"),
        ("build_error", "compile_error", "threadIdx_x"),
    ],
)
def test_bad_candidates_fail(name, status, words):
    r = run(name)
    assert r.status == status, (r.status, r.message, r.log_tail[-1500:])
    assert words in r.message + " ".join(d.message for d in r.ranks)
    assert not r.ok


def test_wrong_on_one_rank_names_that_rank():
    r = run("wrong_on_one_rank")
    assert [d.ok for d in r.ranks] == [True, False]
    bad = r.ranks[1]
    assert bad.first_mismatch is not None and bad.max_abs_err >= 0.5


def test_slowing_the_clock_in_its_own_process_changes_nothing():
    # The candidate slows time.perf_counter in its process after the trials: the judges' clocks
    # are in other processes, so its time is measured as it is.
    r = run("tampers_timer", perf=True)
    assert r.status == "correct", (r.status, r.message)
    assert r.perf.speedup < 3, r.perf


def test_cache_by_address_never_passes():
    # Depending on where the allocator puts each trial's inputs, the stale result shows up as a
    # mismatch, as ranks disagreeing on which collectives to call, or in the in-place re-check.
    r = run("cached_by_address", perf=True)
    assert r.status in ("incorrect", "cheating_detected", "runtime_error", "timeout"), r.message
    assert not r.ok


def test_deadlock_times_out_and_names_stuck_rank():
    r = run("deadlock", timeout=6)
    assert r.status == "timeout", (r.status, r.message)
    assert r.stuck_ranks and set(r.stuck_ranks) <= {0, 1}
    assert r.phases.total_s < 30
    # the next check on the same machine still works
    assert run("honest").status == "correct"


def test_multicast_refused_only_where_disabled(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    r = run("uses_multicast")
    assert r.status == "refused" and "multimem" in r.message and "NCCL_NVLS_ENABLE=0" in r.message
    assert r.phases.total_s < 1 and r.ranks == []  # nothing was started
    for var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        monkeypatch.delenv(var, raising=False)
    assert run("uses_multicast").status == "correct"


def test_multicast_elsewhere_in_the_folder_does_not_refuse(monkeypatch):
    # tests/candidates/ also holds uses_multicast.py: a candidate that does not import it runs.
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    assert run("honest").status == "correct"


def test_multicast_in_a_sibling_source_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    (tmp_path / "solution.py").write_text((CANDIDATES / "honest.py").read_text())
    (tmp_path / "kernel.cu").write_text("// uses cuMulticastCreate\n")
    r = check(tmp_path / "solution.py", "all_reduce", **SMALL)
    assert r.status == "refused" and "kernel.cu" in r.message
    (tmp_path / "kernel.cu").unlink()
    (tmp_path / "helpers.py").write_text("NVLS = True\n")
    (tmp_path / "solution.py").write_text("import helpers\n" + (CANDIDATES / "honest.py").read_text())
    r = check(tmp_path / "solution.py", "all_reduce", **SMALL)
    assert r.status == "refused" and "helpers.py: nvls" in r.message


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(candidate="nope.py"), "no such file"),
        (dict(problem="all_reduse"), "unknown problem 'all_reduse'"),
        (dict(world_size=3), "supports world sizes [2, 4, 8], not 3"),
        (dict(device="tpu"), "expected cuda or cpu"),
        (dict(trials=0), "must be positive"),
        (dict(size=float("nan")), "positive finite number"),
        (dict(timeout=float("inf")), "positive finite number"),
        (dict(hardware="bogus", perf=True), "bogus.yaml: file not found"),
        (dict(confine="chroot"), "expected one of auto, bwrap, none"),
        (dict(graphs="yes"), "--graphs 'yes': expected auto, on or off"),
        (dict(device="cuda"), "GPUs"),
    ],
)
def test_usage_errors(kwargs, words):
    args = dict(candidate=CANDIDATES / "honest.py", problem="all_reduce", **SMALL)
    args.update(kwargs)
    if args["device"] == "cuda":
        import torch

        if torch.cuda.device_count() >= 2:
            pytest.skip("GPUs present")
    with pytest.raises(UsageError, match=words.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        check(**args)


def test_cli_exit_codes_and_last_line_json(tmp_path):
    def pk(*args):
        return subprocess.run([sys.executable, "-m", "pkagent", *args], capture_output=True, text=True, cwd=tmp_path)

    ok = pk(
        "check", str(CANDIDATES / "honest.py"), "--problem", "all_reduce", "--device", "cpu", "--size", "0.001", "--trials", "2"
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["status"] == "correct"
    assert "status: correct" in ok.stdout

    bad = pk(
        "check",
        str(CANDIDATES / "wrong_on_one_rank.py"),
        "--problem",
        "all_reduce",
        "--device",
        "cpu",
        "--size",
        "0.001",
        "--json",
    )
    assert bad.returncode == 1
    assert len(bad.stdout.strip().splitlines()) == 1 and json.loads(bad.stdout)["status"] == "incorrect"

    usage = pk("check", str(CANDIDATES / "honest.py"), "--problem", "nope", "--device", "cpu")
    assert usage.returncode == 2 and "unknown problem" in usage.stderr and "Traceback" not in usage.stderr


@pytest.mark.parametrize("problem", ["moe_dispatch", "sample_sort", "cp_kv_allgather"])
def test_variable_size_problems_time_cleanly(tmp_path, problem):
    # Their shapes depend on the seed: timing and the in-place re-check must cope.
    from eval.cli import candidate_source
    from eval.problem import load_problem

    path = tmp_path / "c.py"
    path.write_text(candidate_source(load_problem(problem)))
    r = check(
        path, problem, world_size=2, device="cpu", size=1 / 256, trials=2, timeout=deadlines.scaled(60), perf=True, batches=3
    )
    assert r.status == "correct", (r.message, r.log_tail[-1500:])
    assert r.perf is not None


PKB = Path(__file__).parent / "fixtures" / "pkb"


@pytest.mark.parametrize(
    "problem, candidate, status",
    [
        ("1", "1_all_reduce_sum_cuda", "correct"),
        ("2_allgather_linear", "2_allgather_linear_cuda", "correct"),
        ("2", "2_allgather_linear_wrong", "incorrect"),
    ],
)
def test_parallelkernelbench_suite(problem, candidate, status):
    r = check(
        PKB / "solutions" / f"{candidate}.py",
        problem,
        suite=f"pkb:{PKB}",
        world_size=2,
        device="cpu",
        size=1 / 64,
        trials=2,
        timeout=deadlines.scaled(60),
        perf=status == "correct",
    )
    assert r.status == status, (r.message, r.log_tail[-800:])
    if status == "correct":
        assert r.perf is not None and r.perf.roofline_ms is None


def test_parallelkernelbench_listing():
    out = subprocess.run(
        [sys.executable, "-m", "pkagent", "problems", "--suite", f"pkb:{PKB}", "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert [p["id"] for p in json.loads(out.stdout)] == ["1_all_reduce_sum", "2_allgather_linear"]


def test_interval_at_least_the_measured_run_to_run_spread():
    # One run's pairs cannot see how the next run's processes land: on CUDA the interval is at
    # least the hardware profile's measured spread wide; a wider bootstrap interval is kept.
    import configs
    from eval.check import _perf
    from eval.problem import load_problem

    spread = configs.load_hardware("h200_2").check_repro_pct
    timed = dict(calls=10, ref_ms=[1.0] * 10, cand_ms=[0.5] * 10, ref_host=0.1, cand_host=0.1, speedup=2.0, verified=10)
    timed.update(pairs=10, seconds=1.0, ci=[1.999, 2.001])
    perf, impossible = _perf(load_problem("all_reduce"), timed, 2, 1.0, "cuda", "h200_2")
    assert impossible is None and perf.check_repro_pct == spread > 0
    assert perf.speedup_ci == pytest.approx((2.0 / (1 + spread / 100), 2.0 * (1 + spread / 100)))
    timed["ci"] = [1.5, 2.5]
    assert _perf(load_problem("all_reduce"), timed, 2, 1.0, "cuda", "h200_2")[0].speedup_ci == (1.5, 2.5)
    assert _perf(load_problem("all_reduce"), timed | {"ci": [1.99, 2.01]}, 2, 1.0, "cpu", "h200_2")[0].speedup_ci == (1.99, 2.01)
    graphs = configs.load_hardware("h200_2").check_repro_graphs_pct
    perf = _perf(load_problem("all_reduce"), timed | {"ci": [1.99, 2.01], "graphs": True}, 2, 1.0, "cuda", "h200_2")[0]
    assert perf.check_repro_pct == graphs and perf.speedup_ci[1] == pytest.approx(2.0 * (1 + graphs / 100))


def test_graph_layout_sees_shapes_dtypes_and_other_arguments():
    # A captured graph fixes its inputs' shapes, dtypes and non-tensor arguments: the judge
    # times graphs only over inputs whose layout matches the captured one.
    import torch

    from eval.compare import layout

    x = torch.zeros(4, 8, dtype=torch.bfloat16)
    assert layout((x, 3)) == layout((torch.ones(4, 8, dtype=torch.bfloat16), 3))  # values do not matter
    assert layout((x, 3)) != layout((torch.zeros(4, 9, dtype=torch.bfloat16), 3))
    assert layout((x, 3)) != layout((x.float(), 3))
    assert layout((x, [1, 2])) != layout((x, [2, 1]))  # e.g. split sizes drawn from the seed
