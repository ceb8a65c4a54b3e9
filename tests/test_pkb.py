"""ParallelKernelBench problems end to end on CPU (gloo, 2 ranks), against a small checkout in its
layout that the tests write (tests/fakes/pkb_tree.py): selecting problems, describing their
inputs without importing the checkout here, prompts, agent and zero-shot runs through the fake
model server, its prompt file, generations in its folder layout."""

import json
import secrets
import sys
from pathlib import Path

import pytest
from fakes import KEY_VARIABLES, SPECS
from fakes.model_server import FakeModelServer, Say
from fakes.pkb_tree import ALL_REDUCE_P2P, make_tree

from agent.solve import make_config, solve
from configs import ConfigError, load_hardware
from eval.problem import ProblemError
from eval.suites import describe_inputs, find, load_pkb, select, signature, solution_path, solutions_dir_name

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
    return [m for m in sys.modules if m.startswith("pkb_reference_") or m.startswith("utils")]


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
    assert signature("import torch\n\ndef solution(x: torch.Tensor, *, k=2):\n    return x\n") == "solution(x: torch.Tensor, *, k=2)"
    with pytest.raises(ProblemError, match="no module-level solution"):
        signature("def helper(x):\n    return x\n", "ref.py")
    with pytest.raises(ProblemError, match="not valid Python"):
        signature("def solution(x)\n", "ref.py")


def test_inputs_described_from_the_checkouts_generator_in_other_processes(tree):
    assert checkout_imported() == []
    two = load_pkb(tree, "2")
    text = describe_inputs(two, 2, 1 / 64)
    assert "args[0]: tensor (64, 128) bfloat16" in text and "args[1]: tensor (128, 64) bfloat16" in text
    assert "args[2]: process group of 2 ranks [0, 1] (the whole world)" in text
    three = describe_inputs(load_pkb(tree, "3"), 4, 1 / 64)
    assert "Every rank of 4" in three and "list of 3: [tensor (128, 8) bfloat16" in three and "float 0.5" in three
    assert checkout_imported() == []  # nothing of the checkout ran in this process
    broken = make_tree(tree.parent / "broken")
    (broken / "utils" / "input_output_tensors.py").write_text("def create_input_tensor(*a, **k):\n    raise RuntimeError('boom')\n")
    assert "input generator failed" in describe_inputs(load_pkb(broken, "1"), 2) and "boom" in describe_inputs(load_pkb(broken, "1"), 2)


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
    assert "pkagent check solution.py --problem 2_allgather_matmul --suite pkb:pkb --device cuda --world-size 2" in render("task.j2", **ctx)
    assert "cp\n   pkb/reference/2_allgather_matmul.py solution.py" in render("task.j2", **ctx)


def test_prompt_file_of_the_checkout(tree):
    from prompts import prompt_from_file, task_context

    ctx = task_context(load_pkb(tree, "1"), load_hardware("h200_2"), world_size=2, device="cuda")
    toml = tree / "kernelgen" / "prompts.toml"
    system, user = prompt_from_file(toml, ctx, checkout=tree, hardware="tree_gpu", target="solutions_x/1_all_reduce_cuda.py")
    assert system == "TREE SYSTEM: you write kernels."
    order = ["TREE PROMPT: write TREE CUDA kernels", "One example in TREE CUDA kernels:", "TREE EXAMPLE", "EXAMPLE-IN",
             "EXAMPLE-OUT", "Optimise this program:", "dist.all_reduce(out, op=dist.ReduceOp.SUM)", "Target precision: TREE BF16.",
             "TREE HARDWARE:\n\nGPU TREE-GPU-9000.", "TREE INSTRUCTION", "solutions_x/1_all_reduce_cuda.py"]
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
    return [Say("Writing a ring all-reduce.", [("bash", {"command": write})], input=3000, output=400),
            Say("Checking it.", [("bash", {"command": check})], input=300, cached=3000, output=60),
            Say("Correct. Submitting.", [("submit", {})], input=900, cached=3300, output=30)]


@pytest.mark.parametrize("provider, mode", [("openai", "agent"), ("anthropic", "agent"), ("google", "zero-shot"),
                                            ("openai-compatible", "zero-shot")])
def test_a_model_solves_a_pkb_problem(server, tree, tmp_path, provider, mode):
    from agent.transcript import read

    spec, _, suffix = SPECS[provider]
    if mode == "agent":
        server.push(*solving_turns("pkagent check solution.py --problem 1 --suite pkb:pkb --device cpu --world-size 2 --size 0.001"))
    else:
        server.push(Say(f"Here it is.\n\n```python\n{ALL_REDUCE_P2P}```\n", input=2000, output=300))
    out = tmp_path / "run"
    cfg = make_config(FAST, problem=f"pkb:{tree}::1", model=spec, mode=mode, base_url=server.url + suffix, device="cpu")
    result = solve(cfg, out)

    assert result.correct and result.check.status == "correct" and result.check.trials_passed == 2, result.model_dump_json(indent=1)
    assert result.check.problem == "1_all_reduce"
    tr = read(out / "transcript.jsonl")
    prompt = json.dumps([e for e in tr if e["event"] == "prompt"])
    assert "dist.all_reduce(out, op=dist.ReduceOp.SUM)" in prompt and "tensor (32, 32) bfloat16" in prompt
    if mode == "agent":
        observed = [e["output"] for e in tr if e["event"] == "observation"]
        assert "1_all_reduce.py" in observed[0] and "input_output_tensors.py" in observed[0]  # the problem's files, copied in
        assert [(e["source"], e["result"]["status"]) for e in tr if e["event"] == "check"] == [("agent", "correct"), ("trusted", "correct")]
    exported = solution_path(out, solutions_dir_name(spec, hardware="h200_2"), "1_all_reduce", 0)
    assert exported.read_text() == ALL_REDUCE_P2P == (out / "solution.py").read_text()
    assert exported.parent.name == f"solutions_cuda_bf16_h200_2_{provider}_{spec.split(':')[1]}"
    assert checkout_imported() == []


def test_zero_shot_with_the_checkouts_prompt_file(server, tree, tmp_path):
    server.push(Say(f"```python\n{ALL_REDUCE_P2P}```\n"))
    spec, _, suffix = SPECS["openai"]
    cfg = make_config(FAST + [f"pkb.prompt_file={tree / 'kernelgen' / 'prompts.toml'}", "pkb.prompt_option=zero_shot"],
                      problem=f"pkb:{tree}::1_all_reduce", model=spec, mode="zero-shot", base_url=server.url + suffix, device="cpu")
    result = solve(cfg, tmp_path / "run")
    assert result.correct, result.message
    messages = server.requests[0]["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == "TREE SYSTEM: you write kernels."
    assert messages[1]["content"].startswith("TREE PROMPT") and "ReduceOp.SUM" in messages[1]["content"]
    assert "kernels_lib" not in messages[1]["content"]  # theirs, not ours

    bad = make_config(FAST + [f"pkb.prompt_file={tree / 'nope.toml'}"], problem=f"pkb:{tree}::1", model=spec, mode="zero-shot",
                      base_url=server.url + suffix, device="cpu")
    with pytest.raises(ConfigError, match="nope.toml"):
        solve(bad, tmp_path / "bad")


def test_solve_refuses_unknown_pkb_problems(tree, tmp_path):
    cfg = make_config(FAST, problem=f"pkb:{tree}::42", model="replay:x.jsonl", device="cpu")
    with pytest.raises(ConfigError, match="no single problem '42'"):
        solve(cfg, tmp_path / "run")
