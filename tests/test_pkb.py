"""ParallelKernelBench problems end to end on CPU (gloo, 2 ranks), against a small checkout in its
layout that the tests write (tests/fakes/pkb_tree.py): selecting problems, describing their
inputs without importing the checkout here, prompts, agent and zero-shot runs through the fake
model server, its prompt file, generations in its folder layout."""

import json
import os
import secrets
import sys
from pathlib import Path

import pytest
from fakes import KEY_VARIABLES, SPECS
from fakes.model_server import FakeModelServer, Say
from fakes.pkb_tree import ALL_REDUCE_P2P, ALLGATHER_MATMUL, REFERENCES, make_tree

from agent.solve import make_config, solve
from configs import ConfigError, load_hardware
from eval.problem import ProblemError
from eval.suites import describe_inputs, find, load_pkb, select, signature, solution_path, solutions_dir_name

REFERENCE_3 = REFERENCES["3_scale_shards"]
FAST = ["agent.retry_wait_s=0.01", "size=0.001", "check.trials=2", "check.timeout_s=120"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return make_tree(tmp_path_factory.mktemp("pkb"))


@pytest.fixture
def server(monkeypatch):
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeModelServer(api_key=f"sk-test-{secrets.token_hex(12)}") as srv:
        for _, var, _ in SPECS.values():
            monkeypatch.setenv(var, srv.api_key)
        yield srv


def checkout_imported() -> list[str]:
    return [m for m in sys.modules if m.startswith(("pkb_reference_", "pkb_input_output_tensors", "utils"))]


def test_select_problems(tree):
    assert select(tree, "") == select(tree, "all") == ["1_all_reduce", "2_allgather_matmul", "3_scale_shards"]
    assert select(tree, "2") == select(tree, "2_allgather_matmul") == ["2_allgather_matmul"]
    assert select(tree, "1-2") == ["1_all_reduce", "2_allgather_matmul"]
    assert select(tree, "3,1-1,3") == ["3_scale_shards", "1_all_reduce"]
    for bad, why in (("9", "no single problem"), ("5-7", "no problem numbered"), ("3-1", "empty"), ("1,,2", "empty entry")):
        with pytest.raises(ProblemError, match=why):
            select(tree, bad)
    with pytest.raises(ProblemError, match="not a ParallelKernelBench checkout"):
        find(tree / "utils", "1")


def test_signature_read_without_running_the_file(tmp_path):
    assert (
        signature("import torch\n\ndef solution(x: torch.Tensor, *, k=2):\n    return x\n") == "solution(x: torch.Tensor, *, k=2)"
    )
    with pytest.raises(ProblemError, match="no module-level solution"):
        signature("def helper(x):\n    return x\n", "ref.py")
    with pytest.raises(ProblemError, match="not valid Python"):
        signature("def solution(x)\n", "ref.py")


def test_inputs_described_from_the_checkouts_generator_in_other_processes(tree, tmp_path, monkeypatch):
    assert checkout_imported() == []
    monkeypatch.setenv("PKAGENT_CACHE", str(tmp_path))
    two = load_pkb(tree, "2")
    text = describe_inputs(two, 2, 1 / 64)
    (cached,) = (tmp_path / "pkb_inputs").glob("*.json")  # the next sample's process reads it from here
    assert describe_inputs(two, 2, 1 / 64) == text and "process group" in cached.read_text()
    assert "args[0]: tensor (64, 128) bfloat16" in text and "args[1]: tensor (128, 64) bfloat16" in text, text
    assert "args[2]: process group of 2 ranks [0, 1] (the whole world)" in text
    three = describe_inputs(load_pkb(tree, "3"), 4, 1 / 64)
    assert "Every rank of 4" in three and "float 0.5" in three, three
    assert "list of 3: [tensor (128, 8) bfloat16" in three and "float 0.5" in three
    assert checkout_imported() == []  # nothing of the checkout ran in this process
    # shapes without memory (meta), and values where the generator needs them (CPU)
    odd = make_tree(tree.parent / "odd")
    (odd / "utils" / "input_output_tensors.py").write_text(
        "import torch\n\ndef create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):\n"
        "    if problem_id == 1:\n        return (torch.empty((1 << 40,), dtype=dtype, device=device),)\n"
        "    n = int(torch.full((1,), 5, device=device).item())\n    return (torch.zeros((n, 3), dtype=dtype, device=device), None, 1.0)\n"
    )
    assert describe_inputs(load_pkb(odd, "1"), 2).endswith("args[0]: tensor (1099511627776,) bfloat16")
    assert "args[0]: tensor (5, 3) bfloat16" in describe_inputs(load_pkb(odd, "2"), 2)
    broken = make_tree(tree.parent / "broken")
    (broken / "utils" / "input_output_tensors.py").write_text(
        "def create_input_tensor(*a, **k):\n    raise RuntimeError('boom')\n"
    )
    failed = describe_inputs(load_pkb(broken, "1"), 2)
    assert "input generator failed" in failed and "RuntimeError: boom" in failed, failed


def test_prompts_show_what_the_model_needs(tree):
    from prompts import render, task_context

    prob = load_pkb(tree, "2")
    ctx = task_context(prob, load_hardware("h200_2"), world_size=2, device="cuda", size=1.0)
    for template in ("task.j2", "zero_shot.j2"):
        text = render(template, **ctx)
        assert (tree / "reference" / "2_allgather_matmul.py").read_text().strip() in text
        assert "solution(x: torch.Tensor, weight: torch.Tensor, group: dist.ProcessGroup)" in text
        assert "args[0]: tensor (512, 1024) bfloat16" in text and "process group of 2 ranks" in text
        assert "atol =\nrtol = 0.01" in text or "atol = rtol = 0.01" in text.replace("\n", " ")
        assert "Never use it; the checker refuses" in text  # no multicast
        assert "## kernels_lib" in text and "H200" in text
        assert "make_inputs" not in text and "roofline)" not in text
    assert "pkagent check solution.py --problem 2_allgather_matmul --suite pkb:pkb --device cuda --world-size 2" in render(
        "task.j2", **ctx
    )
    assert "cp\n   pkb/reference/2_allgather_matmul.py solution.py" in render("task.j2", **ctx)


def test_prompt_file_of_the_checkout(tree):
    from prompts import prompt_from_file, task_context

    ctx = task_context(load_pkb(tree, "1"), load_hardware("h200_2"), world_size=2, device="cuda")
    toml = tree / "kernelgen" / "prompts.toml"
    system, user = prompt_from_file(toml, ctx, checkout=tree, hardware="tree_gpu", target="solutions_x/1_all_reduce_cuda.py")
    assert system == "TREE SYSTEM: you write kernels."
    order = [
        "TREE PROMPT: write TREE CUDA kernels",
        "One example in TREE CUDA kernels:",
        "TREE EXAMPLE",
        "EXAMPLE-IN",
        "EXAMPLE-OUT",
        "Optimise this program:",
        "dist.all_reduce(out, op=dist.ReduceOp.SUM)",
        "Target precision: TREE BF16.",
        "TREE HARDWARE:\n\nGPU TREE-GPU-9000.",
        "TREE INSTRUCTION",
        "solutions_x/1_all_reduce_cuda.py",
    ]
    at = [user.index(s) for s in order]
    assert at == sorted(at), user
    _, bare = prompt_from_file(toml, ctx, checkout=tree, option="zero_shot")
    assert "EXAMPLE-IN" not in bare and "TREE HARDWARE" not in bare and "ReduceOp.SUM" in bare
    with pytest.raises(ValueError, match=r"no \[options.nope\]"):
        prompt_from_file(toml, ctx, checkout=tree, option="nope")
    with pytest.raises(ValueError, match="hardware_profiles.h100"):
        prompt_from_file(toml, ctx, checkout=tree, hardware="h100")
    jinja = tree / "mine.j2"
    jinja.write_text("Write {{ problem.signature }} for {{ world_size }} ranks.")
    assert prompt_from_file(jinja, ctx) == (None, "Write solution(tensor: torch.Tensor) for 2 ranks.\n")


def solving_turns(check: str) -> list[Say]:
    write = f"cat > solution.py <<'EOF'\n{ALL_REDUCE_P2P}EOF\nls pkb/reference pkb/utils"
    return [
        Say("Writing a ring all-reduce.", [("bash", {"command": write})], input=3000, output=400),
        Say("Checking it.", [("bash", {"command": check})], input=300, cached=3000, output=60),
        Say("Correct. Submitting.", [("submit", {})], input=900, cached=3300, output=30),
    ]


@pytest.mark.parametrize(
    "provider, mode", [("openai", "agent"), ("anthropic", "agent"), ("google", "zero-shot"), ("openai-compatible", "zero-shot")]
)
def test_a_model_solves_a_pkb_problem(server, tree, tmp_path, provider, mode):
    from agent.transcript import read

    spec, _, suffix = SPECS[provider]
    if mode == "agent":
        server.push(
            *solving_turns("pkagent check solution.py --problem 1 --suite pkb:pkb --device cpu --world-size 2 --size 0.001")
        )
    else:
        server.push(Say(f"Here it is.\n\n```python\n{ALL_REDUCE_P2P}```\n", input=2000, output=300))
    out = tmp_path / "run"
    cfg = make_config(FAST, problem=f"pkb:{tree}::1", model=spec, mode=mode, base_url=server.url + suffix, device="cpu")
    result = solve(cfg, out)

    assert result.correct and result.check.status == "correct" and result.check.trials_passed == 2, result.model_dump_json(
        indent=1
    )
    assert result.check.problem == "1_all_reduce"
    tr = read(out / "transcript.jsonl")
    prompt = json.dumps([e for e in tr if e["event"] == "prompt"])
    assert "dist.all_reduce(out, op=dist.ReduceOp.SUM)" in prompt and "tensor (32, 32) bfloat16" in prompt
    if mode == "agent":
        observed = [e["output"] for e in tr if e["event"] == "observation"]
        assert "1_all_reduce.py" in observed[0] and "input_output_tensors.py" in observed[0]  # the problem's files, copied in
        assert [(e["source"], e["result"]["status"]) for e in tr if e["event"] == "check"] == [
            ("agent", "correct"),
            ("trusted", "correct"),
        ]
    exported = solution_path(out, solutions_dir_name(spec, hardware="h200_2"), "1_all_reduce", 0)
    assert exported.read_text() == ALL_REDUCE_P2P == (out / "solution.py").read_text()
    assert exported.parent.name == f"solutions_cuda_bf16_h200_2_{provider}_{spec.split(':')[1]}"
    assert checkout_imported() == []


def test_zero_shot_with_the_checkouts_prompt_file(server, tree, tmp_path):
    server.push(Say(f"```python\n{ALL_REDUCE_P2P}```\n"))
    spec, _, suffix = SPECS["openai"]
    cfg = make_config(
        FAST + [f"pkb.prompt_file={tree / 'kernelgen' / 'prompts.toml'}", "pkb.prompt_option=zero_shot"],
        problem=f"pkb:{tree}::1_all_reduce",
        model=spec,
        mode="zero-shot",
        base_url=server.url + suffix,
        device="cpu",
    )
    result = solve(cfg, tmp_path / "run")
    assert result.correct, result.message
    messages = server.requests[0]["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == "TREE SYSTEM: you write kernels."
    assert messages[1]["content"].startswith("TREE PROMPT") and "ReduceOp.SUM" in messages[1]["content"]
    assert "kernels_lib" not in messages[1]["content"]  # theirs, not ours

    bad = make_config(
        FAST + [f"pkb.prompt_file={tree / 'nope.toml'}"],
        problem=f"pkb:{tree}::1",
        model=spec,
        mode="zero-shot",
        base_url=server.url + suffix,
        device="cpu",
    )
    with pytest.raises(ConfigError, match="nope.toml"):
        solve(bad, tmp_path / "bad")


def test_solve_refuses_unknown_pkb_problems(tree, tmp_path):
    cfg = make_config(FAST, problem=f"pkb:{tree}::42", model="replay:x.jsonl", device="cpu")
    with pytest.raises(ConfigError, match="no single problem '42'"):
        solve(cfg, tmp_path / "run")


REAL = Path(__file__).resolve().parents[1] / "third_party" / "ParallelKernelBench"
needs_checkout = pytest.mark.skipif(
    not (REAL / "reference").is_dir(), reason="no ParallelKernelBench checkout in third_party/ (git-ignored; see README)"
)


@needs_checkout
def test_a_real_checkout(tmp_path, monkeypatch):
    from eval.check import check
    from prompts import prompt_from_file, task_context

    stems = select(REAL, "all")
    assert len(stems) >= 87 and stems[0] == "1_allreduce" and select(REAL, "1-8") == stems[:8]
    one = load_pkb(REAL, "1")
    assert describe_inputs(one, 2) == "Every rank of 2 gets the same kinds and shapes:\n  args[0]: tensor (1024, 1024) bfloat16"
    ctx = task_context(one, load_hardware("h200_2"), world_size=2, device="cuda")
    system, user = prompt_from_file(REAL / "kernelgen" / "prompts.toml", ctx, checkout=REAL, hardware="h100_8")
    assert "dist.all_reduce(out, op=dist.ReduceOp.SUM)" in user and "H100" in user and system is None

    # its reference, as a candidate, is correct on CPU; a candidate that mentions multicast never runs
    cand = tmp_path / "1_allreduce_cuda.py"
    cand.write_text(Path(one.path).read_text())
    r = check(cand, "1", suite=f"pkb:{REAL}", world_size=2, device="cpu", size=1 / 64, trials=2, timeout=120)
    assert r.status == "correct", (r.message, r.log_tail[-800:])
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    from fakes.pkb_tree import ALL_REDUCE_MULTICAST

    cand.write_text(ALL_REDUCE_MULTICAST)
    r = check(cand, "1", suite=f"pkb:{REAL}", world_size=2, device="cpu", size=1 / 64, trials=2, timeout=120)
    assert r.status == "refused" and "nothing was run" in r.message and r.phases.startup_s == 0
    assert checkout_imported() == []


class RoutedServer(FakeModelServer):
    """Answers each request with the right candidate for the problem its prompt names: a python
    block (zero-shot) or one turn that writes solution.py and submits (agent)."""

    GOOD = {"1_all_reduce": ALL_REDUCE_P2P, "2_allgather_matmul": ALLGATHER_MATMUL}

    def answer(self, path, headers, raw):
        import re

        body = json.loads(raw or b"{}")
        code = self.GOOD[re.search(r"ParallelKernelBench problem `(\w+)`", json.dumps(body)).group(1)]
        if body.get("tools"):
            self.script.append(
                Say(
                    "Writing and submitting.",
                    [("bash", {"command": f"cat > solution.py <<'EOF'\n{code}EOF\n"}), ("submit", {})],
                    input=3000,
                    output=400,
                )
            )
        else:
            self.script.append(Say(f"```python\n{code}```\n", input=1000, output=200))
        return super().answer(path, headers, raw)


def experiment(tmp_path, tree, **fields):
    from configs import ExperimentConfig, validate

    base = {
        "name": "pkb",
        "problems": [f"pkb:{tree}::1-2"],
        "modes": ["zero-shot", "agent"],
        "samples": 1,
        "device": "cpu",
        "size": 0.001,
        "run_dir": str(tmp_path / "runs"),
        "llm_concurrency": 2,
        "check": {"trials": 2, "timeout_s": 30},
        "agent": {"retry_wait_s": 0.01, "step_limit": 3},
    }
    return validate(ExperimentConfig, {**base, **fields}, "test")


def test_experiment_on_pkb_problems_in_both_modes_and_back_from_their_layout(tmp_path, tree, monkeypatch):
    from experiments.experiment import run_experiment
    from experiments.report import build, pkb_rows

    spec, var, suffix = SPECS["openai"]
    with RoutedServer(api_key="sk-test-pkb-0123456789") as server:
        monkeypatch.setenv(var, server.api_key)
        tally = run_experiment(experiment(tmp_path, tree, models=[spec], base_urls={spec: server.url + suffix}), progress=False)
    assert (tally.done, tally.passed) == (4, 4)
    theirs = tmp_path / "runs" / "pkb" / "pkb_solutions"
    folder = solutions_dir_name(spec, hardware="h200_2")
    for mode in ("zero-shot", "agent"):
        assert sorted(p.name for p in (theirs / mode / folder).iterdir()) == [
            "1_all_reduce_cuda.py",
            "2_allgather_matmul_cuda.py",
        ]
    assert (theirs / "agent" / folder / "2_allgather_matmul_cuda.py").read_text() == ALLGATHER_MATMUL
    (g,) = [g for g in pkb_rows(build(tmp_path / "runs" / "pkb")) if g["mode"] == "agent"]
    assert g["pass@1"] == 1.0 and g["problems"] == 2

    # the agent's generations, read back from that layout and scored again
    again = experiment(tmp_path / "again", tree, models=[f"folder:{theirs / 'agent' / folder}"], modes=["agent"])
    assert run_experiment(again, progress=False).passed == 2


def test_a_folder_of_generations_in_their_layout_scored_and_reported(tmp_path, tree, monkeypatch):
    """Four samples of three problems, sample k in the sibling folder `<folder>_sample<k>` (and one
    as `_sample3` in the folder itself), one failure of every class of that benchmark's taxonomy."""
    import subprocess

    from fakes import pkb_tree as t

    from experiments.experiment import run_experiment
    from experiments.report import build, pkb_rows

    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    folder = tmp_path / "solutions_cuda_bf16_h100_8_together_some_model"
    files = {
        folder: {
            "1_all_reduce_cuda.py": ALL_REDUCE_P2P,
            "2_allgather_matmul_cuda.py": t.ALLGATHER_MATMUL_SHAPE,
            "3_scale_shards_cuda.py": t.SCALE_SHARDS_WRONG,
            "1_all_reduce_cuda_sample3.py": t.ALL_REDUCE_RAISES,
        },
        folder.with_name(folder.name + "_sample1"): {
            "1_all_reduce_cuda.py": t.ALL_REDUCE_TYPO,
            "2_allgather_matmul_cuda.py": t.ALLGATHER_MATMUL,
            "3_scale_shards_cuda.py": t.SYNTAX_ERROR,
        },
        folder.with_name(folder.name + "_sample2"): {
            "1_all_reduce_cuda.py": t.ALL_REDUCE_MULTICAST,
            "2_allgather_matmul_cuda.py": t.ALLGATHER_MATMUL_DEADLOCK,
            "3_scale_shards_cuda.py": REFERENCE_3,
        },
    }
    for where, named in files.items():
        where.mkdir()
        for name, text in named.items():
            (where / name).write_text(text)
    cfg = experiment(
        tmp_path,
        tree,
        problems=[f"pkb:{tree}"],
        models=[f"folder:{folder}"],
        modes=["zero-shot"],
        samples=4,
        check={"trials": 2, "timeout_s": 20},
    )
    tally = run_experiment(cfg, progress=False)
    assert (tally.done, tally.passed) == (12, 3)
    root = tmp_path / "runs" / "pkb"
    data = build(root)
    assert data["pkb"] is True
    (row,) = pkb_rows(data)
    assert row["pass@1"] == pytest.approx(0.25) and row["pass@4"] == 1.0 and row["fast_1@1"] == 0.0  # CPU: no timing
    assert {k: row[k] for k in list(row)[-8:]} == {
        "nvcc/syntax": 1,
        "tensor shape": 1,
        "attribute/API typo": 1,
        "runtime error": 1,
        "output mismatch": 1,
        "deadlock": 1,
        "other": 1,
        "no candidate": 2,
    }
    refused = [s for s in data["samples"] if s["check"] == "refused"]
    assert [(s["problem"], s["sample"]) for s in refused] == [("1_all_reduce", 2)]

    out = subprocess.run(
        [sys.executable, "-m", "pkagent", "report", str(root), "--csv", "--html"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert out.returncode == 0, out.stderr
    assert "ParallelKernelBench's table" in out.stdout and "ParallelKernelBench's failure taxonomy" in out.stdout
    assert all(c in out.stdout for c in ("nvcc/syntax", "attribute/API", "mismatch", "deadlock"))  # headers wrap at spaces
    csv_rows = (root / "report" / "pkb.csv").read_text().splitlines()
    assert csv_rows[0].startswith("model,mode,problems,samples,pass@1,pass@4,fast_1@1,fast_1@4,geomean speedup,nvcc/syntax")
    assert csv_rows[1].startswith(f"folder:{folder},zero-shot,3,12,0.25,1.0,0.0,0.0,,1,1,1,1,1,1,1,2")
    page = (root / "report" / "report.html").read_text()
    assert "ParallelKernelBench's table</h2>" in page and '<table class="pkb">' in page and "deadlock</th>" in page


def test_failure_classes_of_checker_messages():
    from eval.result import CheckResult
    from eval.suites import failure_class

    def cls(status, message, log=""):
        return failure_class(
            CheckResult(
                status=status, problem="p", candidate="c", world_size=2, device="cpu", trials=1, message=message, log_tail=log
            )
        )

    assert cls("compile_error", "Python syntax error at line 1: expected ':'") == "nvcc/syntax"
    assert cls("compile_error", "RuntimeError: Error building extension 'k': nvcc failed") == "nvcc/syntax"
    assert cls("incorrect", "rank 0, trial 0: output: shape (4, 4), expected (8, 4)") == "tensor shape"
    assert cls("incorrect", "rank 1, trial 0: output[0]: expected a tuple of 2, got Tensor") == "tensor shape"
    assert cls("incorrect", "rank 0, trial 1: output: 12 of 16 elements out of tolerance") == "output mismatch"
    assert (
        cls("runtime_error", "rank 0: RuntimeError: The size of tensor a (4) must match the size of tensor b (8)")
        == "tensor shape"
    )
    assert cls("runtime_error", "rank 0: RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 4x4)") == "tensor shape"
    assert (
        cls("runtime_error", "rank 0: AttributeError: module 'torch.distributed' has no attribute 'all_reduce_sum'")
        == "attribute/API typo"
    )
    assert (
        cls("runtime_error", "rank 1: TypeError: solution() takes 1 positional argument but 3 were given") == "attribute/API typo"
    )
    assert cls("import_error", "ModuleNotFoundError: No module named 'kernels'") == "attribute/API typo"
    assert cls("runtime_error", "rank 0: RuntimeError: CUDA error: an illegal memory access was encountered") == "runtime error"
    assert cls("timeout", "ranks [0, 1] made no progress for 20 s") == "deadlock"
    assert cls("refused", "refused, nothing was run: NVLink multicast is disabled here") == "other"


def test_solve_summary_of_a_timed_problem_without_roofline(capsys):
    from agent.cli import print_summary
    from agent.solve import SolveResult
    from eval.result import CheckResult, Perf, Timing

    t = Timing(median_ms=0.02, min_ms=0.01, max_ms=0.03, batches=5, calls_per_batch=10)
    check = CheckResult(
        status="correct",
        problem="1_allreduce",
        candidate="c",
        world_size=2,
        device="cuda",
        trials=5,
        perf=Perf(reference=t, candidate=t.model_copy(update={"median_ms": 0.01}), speedup=2.0),
    )
    print_summary(SolveResult(problem="pkb:/x::1", model="replay:x", mode="agent", status="submitted", correct=True, check=check))
    out = " ".join(capsys.readouterr().out.split())
    assert "speedup 2.00x (no roofline for this problem)" in out


def test_solve_command_on_a_pkb_checkout(tree, tmp_path):
    import subprocess

    script = tmp_path / "reply.jsonl"
    reply = {"text": f"```python\n{ALL_REDUCE_P2P}```\n", "tool_calls": [], "usage": {}, "cost_usd": 0.0, "finish_reason": "stop"}
    script.write_text(json.dumps({"event": "response", "step": 1, "reply": reply}) + "\n")
    run = [
        sys.executable,
        "-m",
        "pkagent",
        "solve",
        "--problem",
        "1",
        "--model",
        f"replay:{script}",
        "--mode",
        "zero-shot",
        "--device",
        "cpu",
        "size=0.001",
        "check.trials=2",
    ]
    out = subprocess.run(
        [*run, "--suite", f"pkb:{tree}", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "correct, 2/2 trials" in out.stdout
    assert (
        tmp_path / "run" / "solutions_cuda_bf16_h200_2_replay_reply.jsonl" / "1_all_reduce_cuda.py"
    ).read_text() == ALL_REDUCE_P2P
    bad = subprocess.run([*run, "--suite", f"pkb:{tmp_path}"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "not a ParallelKernelBench checkout" in bad.stderr and "Traceback" not in bad.stderr
