"""The runs' shared pieces on their own, fast, without processes: the submit/wait loop
(run_tasks) on an in-memory executor, the GPU lease, and the trusted check's settings. The
runs end to end are in test_experiment.py and test_search.py."""

import os
from contextlib import contextmanager

import pytest

import agent.trusted
from agent.solve import SolveConfig, SolveResult
from agent.trusted import check_kernel, lease
from experiments.executors import Task, run_tasks


def task(k: int) -> Task:
    return Task(
        solve=SolveConfig(problem="all_reduce", model="m:x", mode="zero-shot"),
        sample=k,
        dir=f"/nowhere/{k}",
        tmp=f"/nowhere/.{k}",
    )


class MemoryExecutor:
    """Runs `work(task)` when waited on, one task per wait, in submission order; records the
    largest number of tasks it held at once."""

    def __init__(self, work):
        self.work, self.queue, self.most = work, [], 0

    def submit(self, t: Task):
        self.queue.append(t)
        self.most = max(self.most, len(self.queue))
        return t.sample

    def wait(self, handles, timeout):
        t = self.queue.pop(0)
        assert t.sample in handles
        try:
            return [(t.sample, self.work(t))]
        except Exception as e:  # what a worker that raised hands back
            return [(t.sample, e)]

    def close(self):
        pass


def ok(t: Task) -> SolveResult:
    return SolveResult(problem="all_reduce", model="m:x", mode="zero-shot", status="completed", correct=True)


def test_run_tasks_keeps_slots_full_and_hands_back_every_result():
    todo, done, shown = [task(k) for k in range(5)], [], []
    ex = MemoryExecutor(ok)
    run_tasks(ex, 2, lambda running: todo.pop(0) if todo else None, lambda t, r: done.append((t.sample, r.status)), shown.append)
    assert done == [(k, "completed") for k in range(5)] and ex.most == 2
    assert shown[0] == 2 and shown[-1] == 0 and max(shown) == 2


def test_run_tasks_turns_a_raising_worker_into_an_error_record():
    def work(t):
        if t.sample == 1:
            raise OSError("the worker died")
        return ok(t)

    todo, done = [task(k) for k in range(3)], {}
    run_tasks(MemoryExecutor(work), 3, lambda running: todo.pop(0) if todo else None, lambda t, r: done.setdefault(t.sample, r))
    assert done[1].status == "error" and done[1].message == "OSError: the worker died" and not done[1].correct
    assert done[1].out_dir == "/nowhere/.1" and done[0].correct and done[2].correct


def test_run_tasks_asks_for_more_as_tasks_end_and_sees_what_runs():
    seen, issued = [], iter(range(4))

    def next_task(running):
        seen.append(sorted(t.sample for t in running))
        k = next(issued, None)
        return None if k is None else task(k)

    run_tasks(MemoryExecutor(ok), 2, next_task, lambda t, r: None)
    assert seen[:3] == [[], [0], [1]]  # two started, then one more each time one ends
    assert seen[-1] == []  # nothing runs when it is asked the last time


class Pool:
    def __init__(self, ids):
        self.ids, self.held = ids, []

    def acquire(self, n):
        @contextmanager
        def cm():
            self.held.append(self.ids[:n])
            try:
                yield self.ids[:n]
            finally:
                self.held.pop()

        return cm()


def test_lease_sets_and_restores_the_visible_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    pool = Pool([2, 3, 5])
    with lease(pool, 2, visible=True) as ids:
        assert ids == [2, 3] and pool.held == [[2, 3]]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3" and os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert pool.held == [] and os.environ["CUDA_VISIBLE_DEVICES"] == "7" and "CUDA_DEVICE_ORDER" not in os.environ
    with pytest.raises(RuntimeError), lease(pool, 1, visible=True):
        raise RuntimeError("the phase failed")
    assert pool.held == [] and os.environ["CUDA_VISIBLE_DEVICES"] == "7"  # given back and restored anyway
    with lease(pool, 2) as ids:
        assert ids == [2, 3] and os.environ["CUDA_VISIBLE_DEVICES"] == "7"  # not visible: the sandbox's phase
    with lease(None, 2, visible=True) as ids:
        assert ids is None and os.environ["CUDA_VISIBLE_DEVICES"] == "7"


@pytest.mark.parametrize(
    "device, override, perf, leased",
    [("cpu", {}, False, []), ("cuda", {}, True, [[0, 1]]), ("cpu", {"perf": True, "trials": 9}, True, [])],
)
def test_check_kernel_passes_the_samples_settings(monkeypatch, device, override, perf, leased):
    calls, pool = [], Pool([0, 1, 2])

    def fake_check(candidate, problem, **args):
        calls.append((candidate, problem, args, list(pool.held), os.environ.get("CUDA_VISIBLE_DEVICES")))
        return "verdict"

    monkeypatch.setattr("eval.check.check", fake_check)
    cfg = SolveConfig(
        problem="all_gather",
        model="m:x",
        device=device,
        world_size=2,
        size=0.5,
        hardware="h200_2",
        check={
            "trials": 3,
            "timeout_s": 60,
            "perf": True,
            "repeats": 4,
            "confine": "bwrap",
            "pass_env": ["HF_HOME"],
            "graphs": "off",
        },
    )
    assert check_kernel(cfg, "/x/solution.py", pool, **override) == "verdict"
    ((candidate, problem, args, held, visible),) = calls
    assert (candidate, problem) == ("/x/solution.py", "all_gather")
    assert args == dict(
        world_size=2,
        device=device,
        trials=override.get("trials", 3),
        perf=perf,
        size=0.5,
        timeout=60,
        hardware="h200_2",
        repeats=4,
        time_budget_s=None,
        ci_width=0.02,
        confine="bwrap",
        pass_env=("HF_HOME",),
        graphs="off",
    )
    assert held == leased and (visible == "0,1") == (device == "cuda")


def test_machine_pool_names_the_option_when_gpus_are_short(monkeypatch):
    from configs import ConfigError
    from sandbox import GpuPool

    monkeypatch.setattr(GpuPool, "from_machine", classmethod(lambda cls: GpuPool([[0, 1], [1, 0]])))
    assert agent.trusted.machine_pool(2).gpus == [0, 1]
    with pytest.raises(
        ConfigError, match=r"^device cuda: this machine has 2 GPUs and the run needs 4; without GPUs use device=cpu$"
    ):
        agent.trusted.machine_pool(4, None, "device cuda", "device=cpu")
    with pytest.raises(ConfigError, match=r"^gpus: \[1, 2\]: this machine has GPUs \[0, 1\]$"):
        agent.trusted.machine_pool(1, [1, 2])
    assert agent.trusted.machine_pool(1, [1]).gpus == [1]
