"""The checker on GPUs (NCCL): the tricks that only exist there, and the same adversarial
candidates as on CPU. Skipped on machines with fewer than two CUDA devices."""

from pathlib import Path

import pytest
import torch

from eval.check import check

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")]

CANDIDATES = Path(__file__).parent / "candidates"
ARGS = dict(world_size=2, device="cuda", size=1 / 16, trials=5, timeout=60)


def run(name, **kw):
    return check(CANDIDATES / f"{name}.py", "all_reduce", **{**ARGS, **kw})


def test_honest_is_correct_and_speedup_near_one():
    r = run("honest", perf=True)
    assert r.status == "correct", r.message + r.log_tail
    assert 0.9 <= r.perf.speedup <= 1.1, r.perf
    lo, hi = r.perf.speedup_ci
    assert lo <= 1.0 <= hi or abs(r.perf.speedup - 1) < 0.05, r.perf  # the truth is 1
    assert r.perf.verified_calls == r.perf.pairs
    assert r.perf.roofline_ms and 0 < r.perf.reference_roofline_fraction <= 1.0


def test_graphs_time_replays_of_both_sides():
    # At 1/1000 of the default size a call takes tens of microseconds, mostly the host's: "auto"
    # captures both sides, and the reference against itself still measures 1.
    r = run("honest", perf=True, size=0.001)
    assert r.status == "correct", r.message + r.log_tail
    assert r.perf.graphs, r.perf.graphs_note
    assert 0.9 <= r.perf.speedup <= 1.1, r.perf
    assert r.perf.verified_calls == r.perf.pairs


def test_not_capturable_is_timed_call_by_call():
    r = run("not_capturable", perf=True, graphs="on")
    assert r.status == "correct", r.message + r.log_tail
    assert not r.perf.graphs and "the candidate cannot be captured" in r.perf.graphs_note, r.perf


def test_graph_replays_wrong_from_the_start_are_timed_call_by_call():
    # Right when called, wrong when replayed (like an epoch kept on the host): not a cheat, just
    # not graph-safe; it is timed the way it was checked.
    r = run("stale_when_captured", perf=True, graphs="on")
    assert r.status == "correct", r.message + r.log_tail
    assert not r.perf.graphs and "graph replays gave wrong results" in r.perf.graphs_note, r.perf


def test_graph_replays_that_go_stale_while_timed_are_caught():
    r = run("stale_after_replays", perf=True, graphs="on")
    assert r.status == "incorrect", (r.status, r.message, r.log_tail[-1500:])
    assert "drawn after the batch" in r.message


def test_side_stream_work_is_timed():
    # 20 extra passes over the tensor on a side stream: it must look slower than the reference,
    # not free as a timer that records only the current stream would show it.
    r = run("side_stream", perf=True)
    assert r.status == "correct", r.message + r.log_tail
    assert r.perf.speedup < 0.9, r.perf


@pytest.mark.parametrize(
    "name, status",
    [
        ("freed_memory", "incorrect"),
        ("cached_outputs", "incorrect"),
        ("modifies_inputs", "incorrect"),
        ("wrong_on_one_rank", "incorrect"),
        ("nan_output", "incorrect"),
        ("kills_itself", "runtime_error"),
        ("tampers", "incorrect"),
    ],
)
def test_tricks_fail_on_gpu(name, status):
    r = run(name)
    assert r.status == status, (r.status, r.message, r.log_tail[-1500:])


def test_cache_by_address_caught():
    r = run("cached_by_address", perf=True)
    assert not r.ok, r.message


def test_deadlock_times_out_then_gpus_still_work():
    r = run("deadlock", timeout=10)
    assert r.status == "timeout", (r.status, r.message)
    assert r.stuck_ranks
    assert r.phases.total_s < 60
    after = run("honest")
    assert after.status == "correct", after.message + after.log_tail
