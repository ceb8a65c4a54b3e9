"""A small checkout in ParallelKernelBench's layout, written by the tests where they need one:

    reference/1_all_reduce.py          solution(tensor): a sum all-reduce into a new tensor
    reference/2_allgather_matmul.py    solution(x, weight, group): gather rows over `group`, then x @ weight
    reference/3_scale_shards.py        solution(shards, alpha): a list of tensors and a float
    utils/input_output_tensors.py      create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial, device)
    kernelgen/prompts.toml             a prompt file in that benchmark's layout (our own words)
    kernelgen/example_in.py, example_out.py   its in-context example

plus candidates in its naming ({stem}_{backend}.py) for the tests that score folders.
"""

from __future__ import annotations

from pathlib import Path

REFERENCES = {
    "1_all_reduce": """\
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
""",
    "2_allgather_matmul": '''\
"""Rows of x are sharded over the group; every rank needs all rows times its weight."""
import torch
import torch.distributed as dist


def solution(x: torch.Tensor, weight: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    full = torch.empty((x.shape[0] * world, x.shape[1]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(full, x, group=group)
    return full @ weight
''',
    "3_scale_shards": """\
import torch
import torch.distributed as dist


def solution(shards: list, alpha: float) -> tuple:
    total = torch.stack(shards).float().sum(0)
    dist.all_reduce(total)
    return (total * alpha).to(shards[0].dtype), total.abs().max()
""",
}

GENERATOR = """\
import torch
import torch.distributed as dist


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    torch.manual_seed(42 + problem_id * 1000 + rank + trial * 1_000_003)
    dev = device if device is not None else torch.device("cuda", rank)
    m, n = base_shape
    if problem_id == 1:
        return (torch.randn((m, n), device=dev).to(dtype),)
    if problem_id == 2:
        x = torch.randn((m // world_size, n), device=dev).to(dtype)
        w = (torch.randn((n, n // 2), device=dev) / n ** 0.5).to(dtype)
        return (x, w, dist.group.WORLD)
    if problem_id == 3:
        return ([torch.randn((m, 8), device=dev).to(dtype) for _ in range(3)], 0.5)
    raise ValueError(f"no problem {problem_id}")
"""

PROMPTS_TOML = '''\
[meta]
version = "test"

[shared]
problem_statement = """
TREE PROMPT: write {backend_display} for a multi-GPU program.
"""
instruction = """
TREE INSTRUCTION: reply with one python block holding the whole file.
"""

[backends.cuda]
backend_display = "TREE CUDA kernels"
generate_kernel_system_prompt = """
TREE SYSTEM: you write kernels.
"""

[[backends.cuda.in_context_examples]]
label = "TREE EXAMPLE"
pytorch_solution = "kernelgen/example_in.py"
custom_solution = "kernelgen/example_out.py"

[precision.bf16]
precision_display = "TREE BF16"

[templates.common]
arch_block = """
Optimise this program:

{ref_arch_src}
"""
examples_block = """
{examples_intro}

{examples_entries}
"""
example_intro_one_shot = "One example in {backend_display}:"
example_intro_few_shot = "Examples in {backend_display}:"
example_entry_template = """
{example_label}
BEFORE:
{input_code}
AFTER:
{output_code}
"""
precision_note = "Target precision: {precision_display}."
hardware_context = "{hardware_context_body}"

[templates.hardware]
hardware_header = "TREE HARDWARE:"
hardware_specs = "GPU {gpu_name}."

[options.zero_shot]
components = ["problem_statement", "arch_block", "precision_note", "instruction"]

[options.generate_kernel]
components = ["problem_statement", "examples_block", "arch_block", "precision_note", "hardware_context", "instruction"]

[hardware_profiles.tree_gpu]
gpu_name = "TREE-GPU-9000"
'''


def make_tree(root: Path) -> Path:
    """Write the checkout under `root`; returns root."""
    for stem, text in REFERENCES.items():
        (root / "reference").mkdir(parents=True, exist_ok=True)
        (root / "reference" / f"{stem}.py").write_text(text)
    (root / "utils").mkdir(exist_ok=True)
    (root / "utils" / "input_output_tensors.py").write_text(GENERATOR)
    (root / "kernelgen").mkdir(exist_ok=True)
    (root / "kernelgen" / "prompts.toml").write_text(PROMPTS_TOML)
    (root / "kernelgen" / "example_in.py").write_text("def solution(a, b):\n    return a + b  # EXAMPLE-IN\n")
    (root / "kernelgen" / "example_out.py").write_text("def solution(a, b):\n    return b + a  # EXAMPLE-OUT\n")
    return root


# Candidates, as a model would write them (gloo-friendly, so that they run on CPU).
ALL_REDUCE_P2P = """\
import torch
import torch.distributed as dist


def solution(tensor):
    world, rank = dist.get_world_size(), dist.get_rank()
    acc = tensor.float().clone()
    for step in range(1, world):  # ring of exchanges: every rank adds every other rank's tensor
        send = tensor.contiguous()
        recv = torch.empty_like(send)
        reqs = [dist.isend(send, (rank + step) % world), dist.irecv(recv, (rank - step) % world)]
        for r in reqs:
            r.wait()
        acc += recv.float()
    return acc.to(tensor.dtype)
"""

ALLGATHER_MATMUL = """\
import torch
import torch.distributed as dist


def solution(x, weight, group):
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts).float() @ weight.float()
"""

ALLGATHER_MATMUL_SHAPE = """\
def solution(x, weight, group):
    return x @ weight  # forgets the other ranks' rows: a tensor of the wrong shape
"""

ALL_REDUCE_TYPO = """\
import torch.distributed as dist


def solution(tensor):
    out = tensor.clone()
    dist.all_reduce_sum(out)  # no such function
    return out
"""

ALL_REDUCE_MULTICAST = """\
import torch
from torch.distributed import _symmetric_memory as symm


def solution(tensor):
    handle = symm.rendezvous(symm.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device), "0")
    return torch.empty(1) if handle.multicast_ptr else tensor  # reaches for NVLink multicast
"""

SCALE_SHARDS_WRONG = """\
import torch


def solution(shards, alpha):
    total = torch.stack(shards).float().sum(0)  # forgets the other ranks
    return (total * alpha).to(shards[0].dtype), total.abs().max()
"""

SYNTAX_ERROR = "def solution(tensor)\n    return tensor\n"

ALLGATHER_MATMUL_DEADLOCK = """\
import torch
import torch.distributed as dist


def solution(x, weight, group):
    t = torch.empty(1)
    dist.recv(t, 1 - dist.get_rank())  # both ranks wait for the other: a deadlock
    return x
"""

ALL_REDUCE_RAISES = """\
def solution(tensor):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""
