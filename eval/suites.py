"""Where problems come from: our suite (`all_reduce`) or a ParallelKernelBench checkout
(`pkb:PATH::ID`), so that its problems and its candidates run through the same checker.

A ParallelKernelBench problem is `reference/{id}_{name}.py` exposing `solution(*args)`, with
inputs from `utils/input_output_tensors.py: create_input_tensor(rank, world_size, problem_id,
base_shape, dtype, trial, device)`. It has no roofline, and its outputs are compared as float
with atol = rtol = 1e-2, as that benchmark does.

A checkout's code is imported only where it runs: in the checker's rank processes (the problem's
reference and make_inputs import it at their first call) and in `describe_inputs`' own
processes. Listing, selecting and prompting read its files as text.

Generations are also written in that benchmark's own layout, so that its harness can re-score
them: `solutions_<backend>_<precision>_<hardware>_<provider>_<model>/{stem}_{backend}.py` for
sample 0 and the sibling folder `<that folder>_sample<k>/` for sample k (its harness reads
one `{stem}_{backend}.py` per `--solutions-dir`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch

from eval.problem import Meta, Problem, ProblemError, load_problem

PKB_PREFIX = "pkb:"
ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-2  # that benchmark's atol and rtol, on outputs compared after .float()


def qualify(problem: str, suite: str | None) -> str:
    """The problem reference the checker passes around: `ID` or `pkb:PATH::ID`."""
    if not suite or suite == "pkagent":
        return problem
    if not suite.startswith(PKB_PREFIX):
        raise ProblemError(f"unknown suite {suite!r} (expected pkagent or pkb:PATH)")
    return f"{PKB_PREFIX}{Path(suite[len(PKB_PREFIX) :]).resolve()}::{problem}"


def split(ref: str) -> tuple[Path, str]:
    """`pkb:PATH::ID` -> (PATH, ID); `pkb:PATH` -> (PATH, "")."""
    body = ref[len(PKB_PREFIX) :]
    root, sep, pid = body.rpartition("::")
    return (Path(root), pid) if sep else (Path(body), "")


def load(ref: str) -> Problem:
    if ref.startswith(PKB_PREFIX):
        root, pid = split(ref)
        return load_pkb(root, pid)
    return load_problem(ref)


def _number(stem: str) -> int:
    head = stem.split("_")[0]
    return int(head) if head.isdigit() else 1 << 30


def checkout(root: Path) -> Path:
    if not (root / "reference").is_dir():
        raise ProblemError(f"{root}: not a ParallelKernelBench checkout (no reference/ folder)")
    return root


def pkb_ids(root: Path) -> list[str]:
    """The problem stems of a checkout, in number order."""
    return sorted((p.stem for p in (checkout(root) / "reference").glob("*.py")), key=lambda s: (_number(s), s))


def find(root: Path, pid: str) -> str:
    """The stem of problem `pid`: a number (`1`) or a stem (`1_allreduce`)."""
    stems = pkb_ids(root)
    matches = [s for s in stems if s == pid or s.split("_")[0] == pid]
    if len(matches) != 1:
        raise ProblemError(
            f"{root / 'reference'}: no single problem {pid!r} (found {len(matches)}; ids: {', '.join(stems[:10])} ...)"
        )
    return matches[0]


def select(root: Path, spec: str) -> list[str]:
    """Stems chosen by `spec`: empty or `all` (every problem), an id or stem, a list `1,3,7`,
    a range of numbers `1-8`, or a mix `1-4,9`."""
    stems = pkb_ids(root)
    if spec in ("", "all"):
        return stems
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        m = re.fullmatch(r"(\d+)-(\d+)", part)
        if m:
            lo, hi = int(m[1]), int(m[2])
            if lo > hi:
                raise ProblemError(f"{root}: range {part!r} is empty")
            found = [s for s in stems if lo <= _number(s) <= hi]
            if not found:
                raise ProblemError(f"{root}: no problem numbered {part}")
            out += found
        elif part:
            out.append(find(root, part))
        else:
            raise ProblemError(f"{root}: empty entry in {spec!r}")
    return list(dict.fromkeys(out))


def signature(source: str, path: str = "solution") -> str:
    """`solution(a, b, group)`: the reference's signature, read from its source."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ProblemError(f"{path}: not valid Python ({e.msg}, line {e.lineno})") from None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "solution":
            return f"solution({ast.unparse(node.args)})"
    raise ProblemError(f"{path}: defines no module-level solution(*args)")


def side(size: float) -> int:
    """The base shape's side (M = N) at size scale `size`: 1024 at 1.0, a multiple of 16."""
    return max(16, int(1024 * math.sqrt(size)) // 16 * 16)


@functools.cache
def _imported(root: str, stem: str):
    """The checkout's reference module and input generator, imported (rank processes only)."""
    import importlib.util

    def by_path(name: str, path: Path):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    if root not in sys.path:  # for what its files import from the checkout
        sys.path.insert(0, root)
    # by path, so that no other package named `utils` can stand in for the checkout's own generator
    generator = by_path("pkb_input_output_tensors", Path(root, "utils", "input_output_tensors.py"))
    return by_path(f"pkb_reference_{stem}", Path(root, "reference", f"{stem}.py")), generator.create_input_tensor


def load_pkb(root: Path, pid: str) -> Problem:
    """Problem `pid` of the checkout at `root`; its code is imported at the first call of its
    reference or make_inputs, never here."""
    root = checkout(root.resolve())
    stem = find(root, pid)
    path = root / "reference" / f"{stem}.py"
    source = path.read_text(encoding="utf-8", errors="replace")
    signature(source, str(path))  # a file without solution() is refused before anything runs
    number = _number(stem)

    def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
        _, create = _imported(str(root), stem)
        n = side(size)
        out = create(rank, world_size, number, base_shape=(n, n), dtype=torch.bfloat16, trial=seed, device=device)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)

    def reference(*args):
        return _imported(str(root), stem)[0].solution(*args)

    stub = types.ModuleType(f"pkb_reference_{stem}", ast.get_docstring(ast.parse(source)))
    stub.__file__ = str(path)
    meta = Meta(
        id=stem,
        name=stem.split("_", 1)[-1].replace("_", " "),
        category="other",
        source_repo="togethercomputer/ParallelKernelBench",
        source_file=f"reference/{stem}.py",
        source_function="solution",
        atol=TOLERANCE,
        rtol=TOLERANCE,
        strict_dtype=False,
        tags=("pkb",),
    )
    return Problem(meta, stub, make_inputs, reference, None, str(path))


def is_pkb(problem: Problem) -> bool:
    return "pkb" in problem.meta.tags


# --- what the inputs look like, from the checkout's own generator ------------------------------------


def _describe(x, depth: int = 0) -> str:
    import torch.distributed as dist

    if isinstance(x, torch.Tensor):
        extra = "" if x.is_contiguous() else f", strides {tuple(x.stride())}"
        return f"tensor {tuple(x.shape)} {str(x.dtype).replace('torch.', '')}{extra}"
    if isinstance(x, dist.ProcessGroup):
        ranks = dist.get_process_group_ranks(x)
        return f"process group of {len(ranks)} ranks {ranks}" + (" (the whole world)" if x == dist.group.WORLD else "")
    if isinstance(x, torch.nn.Module):
        params = ", ".join(f"{n} {tuple(p.shape)} {str(p.dtype).replace('torch.', '')}" for n, p in x.named_parameters())
        return f"{type(x).__name__} module ({params or 'no parameters'})"
    if isinstance(x, torch.Size):
        return f"torch.Size({list(x)})"
    if depth > 3:
        return type(x).__name__
    if isinstance(x, (list, tuple)):
        inner = [_describe(v, depth + 1) for v in x[:8]]
        more = f", ... ({len(x)} in all)" if len(x) > 8 else ""
        return f"{type(x).__name__} of {len(x)}: [" + "; ".join(inner) + more + "]"
    if isinstance(x, dict):
        return "dict {" + "; ".join(f"{k!r}: {_describe(v, depth + 1)}" for k, v in list(x.items())[:12]) + "}"
    if hasattr(x, "__dataclass_fields__"):
        fields = "; ".join(f"{k}: {_describe(getattr(x, k), depth + 1)}" for k in x.__dataclass_fields__)
        return f"{type(x).__name__}({fields})"
    if isinstance(x, (bool, int, float, str)) or x is None:
        return f"{type(x).__name__} {x!r}"
    return type(x).__name__


def _describe_rank(root: str, stem: str, world: int, rank: int, port: int, size: float, device: str) -> list[str]:
    """In a process of its own: join a gloo group, run the generator on `device`, describe each input."""
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        prob = load_pkb(Path(root), stem)
        return [_describe(x) for x in prob.make_inputs(rank, world, 0, device, size)]
    finally:
        dist.destroy_process_group()


def _run_generator(root: str, stem: str, world: int, size: float, device: str) -> tuple:
    """("ok", per-rank descriptions) or ("error", why), from `world` processes of a gloo group."""
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    argv = [sys.executable, "-m", "eval.suites", root, stem, str(world), "RANK", str(store.port), repr(size), device]
    with tempfile.TemporaryDirectory(prefix="pkagent-inputs-") as tmp:
        procs = [
            subprocess.Popen(
                [str(r) if a == "RANK" else a for a in argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=tmp,
                env=env,
                start_new_session=True,
            )
            for r in range(world)
        ]
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=180)[0].decode(errors="replace"))
        except subprocess.TimeoutExpired:
            return ("error", "the input generator did not finish within 180 s")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    ranks = []
    for out in outs:
        line = next((ln for ln in reversed(out.splitlines()) if ln.startswith('{"')), None)
        if line is None:
            return ("error", out.strip()[-800:] or "the input generator printed nothing")
        got = json.loads(line)
        if "error" in got:
            return ("error", got["error"])
        ranks.append(tuple(got["inputs"]))
    return ("ok", tuple(ranks))


@functools.lru_cache(maxsize=64)
def _describe_cached(root: str, stem: str, world: int, size: float, stamp: tuple) -> tuple:
    """On the meta device first (shapes without memory: some generators make tens of GB), then,
    for a generator that needs values (.item(), data-dependent shapes), on CPU."""
    first = _run_generator(root, stem, world, size, "meta")
    if first[0] == "ok":
        return first
    second = _run_generator(root, stem, world, size, "cpu")
    return second if second[0] == "ok" else ("error", second[1])


def describe_inputs(problem: Problem, world_size: int, size: float = 1.0) -> str:
    """What `solution(*args)` receives on each rank at this world size and size, as text:
    from the checkout's own generator, run on CPU in `world_size` processes of a gloo group
    (some inputs are process groups), never in this process."""
    path = Path(problem.path)
    root, stem = path.parents[1], path.stem
    stamp = tuple(p.stat().st_mtime_ns for p in (path, root / "utils" / "input_output_tensors.py") if p.exists())
    key = hashlib.sha256(json.dumps([str(root), stem, world_size, float(size), stamp]).encode()).hexdigest()[:24]
    cached = Path(os.environ.get("PKAGENT_CACHE", Path.home() / ".cache" / "pkagent")) / "pkb_inputs" / f"{key}.json"
    try:  # every sample of an experiment asks again, each in a process of its own
        kind, value = json.loads(cached.read_text())
    except (OSError, ValueError):
        kind, value = _describe_cached(str(root), stem, world_size, float(size), stamp)
        if kind == "ok":
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps([kind, value]))
                os.replace(tmp, cached)
            except OSError:
                pass
    if kind == "error":
        return f"(the checkout's input generator failed on CPU at world size {world_size}: {value})"
    lines = []
    if all(r == value[0] for r in value):
        lines.append(f"Every rank of {world_size} gets the same kinds and shapes:")
        lines += [f"  args[{i}]: {d}" for i, d in enumerate(value[0])]
    else:
        for rank, descs in enumerate(value):
            lines.append(f"Rank {rank}:")
            lines += [f"  args[{i}]: {d}" for i, d in enumerate(descs)]
    return "\n".join(lines)


# --- that benchmark's failure taxonomy -----------------------------------------------------------------

FAILURE_CLASSES = ("nvcc/syntax", "tensor shape", "attribute/API typo", "runtime error", "output mismatch", "deadlock", "other")
_SHAPE = re.compile(
    r"\bshape\b|size of tensor|sizes? mismatch|must match the size|mat1 and mat2|expected size|"
    r"invalid for input of size|dimension out of range|expected a (tensor|tuple|list|dict)|expected keys",
    re.I,
)
_API = re.compile(
    r"\b(AttributeError|NameError|ImportError|ModuleNotFoundError)\b|has no attribute|is not defined|"
    r"unexpected keyword argument|positional arguments? but|missing \d+ required|defines no function solution"
)


def failure_class(check) -> str:
    """The class of a failed check (an eval.result.CheckResult) in that benchmark's taxonomy:
    nvcc/syntax (the file or its extension does not build), tensor shape (outputs or operands of
    the wrong shape or structure), attribute/API typo (a name, attribute or signature that does
    not exist), runtime error (anything else raised), output mismatch (values out of tolerance),
    deadlock (ranks that never finish); other: refused (multicast) or caught cheating."""
    text = f"{check.message}\n{check.log_tail[-3000:]}"
    if check.status == "compile_error":
        return "nvcc/syntax"
    if check.status == "timeout":
        return "deadlock"
    if check.status == "incorrect":
        return "tensor shape" if _SHAPE.search(check.message) else "output mismatch"
    if check.status in ("import_error", "runtime_error"):
        if _API.search(check.message):
            return "attribute/API typo"
        if _SHAPE.search(check.message):
            return "tensor shape"
        return "attribute/API typo" if check.status == "import_error" and _API.search(text) else "runtime error"
    return "other"


# --- that benchmark's folder layout for generations -------------------------------------------------


def _slug(text: str, limit: int = 72) -> str:
    s = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip().replace("/", "_"))).strip("_")
    return (s or "model")[:limit]


def solutions_dir_name(model_spec: str, backend: str = "cuda", precision: str = "bf16", hardware: str | None = None) -> str:
    """`solutions_<backend>_<precision>_<hardware|none>_<provider>_<model>` for a model spec
    `provider:model` (a path in `model`, as replay: and folder: specs have, keeps its last part)."""
    provider, _, model = model_spec.partition(":")
    if provider in ("replay", "folder"):
        model = Path(model.rstrip("/")).name
    return f"solutions_{backend}_{precision}_{hardware or 'none'}_{_slug(provider, 32)}_{_slug(model)}"


def solution_path(base: Path, folder: str, stem: str, sample: int, backend: str = "cuda") -> Path:
    """Where sample `sample` of problem `stem` goes under `base` in that benchmark's layout."""
    return base / (folder if sample == 0 else f"{folder}_sample{sample}") / f"{stem}_{backend}.py"


def generation_files(folder: Path, stem: str) -> dict[int, list[Path]]:
    """{sample: files} of problem `stem` in a folder of generations: `{stem}_{backend}.py` is
    sample 0 and `{stem}_{backend}_sample{k}.py` sample k; the sibling folders `<folder>_sample{k}/`
    (that benchmark's layout, as solution_path writes it) hold sample k as `{stem}_{backend}.py`."""
    pattern = re.compile(re.escape(stem) + r"_(?P<backend>[A-Za-z0-9]+)(?:_sample(?P<k>\d+))?\.py")
    found: dict[int, list[Path]] = {}
    for p in sorted(folder.glob(f"{glob_escape(stem)}_*.py")):
        m = pattern.fullmatch(p.name)
        if m:
            found.setdefault(int(m["k"] or 0), []).append(p)
    if folder.name:
        for sib in sorted(folder.parent.glob(f"{glob_escape(folder.name)}_sample*")):
            k = sib.name[len(folder.name) + len("_sample") :]
            if not (sib.is_dir() and k.isdigit()):
                continue
            for p in sorted(sib.glob(f"{glob_escape(stem)}_*.py")):
                m = pattern.fullmatch(p.name)
                if m and m["k"] is None:
                    found.setdefault(int(k), []).append(p)
    return found


def glob_escape(text: str) -> str:
    return re.sub(r"([*?[])", r"[\1]", text)


if __name__ == "__main__":  # python -m eval.suites ROOT STEM WORLD RANK PORT SIZE DEVICE (describe_inputs' processes)
    root_, stem_, world_, rank_, port_, size_, device_ = sys.argv[1:8]
    try:
        print(
            json.dumps({"inputs": _describe_rank(root_, stem_, int(world_), int(rank_), int(port_), float(size_), device_)}),
            flush=True,
        )
    except Exception as e:  # noqa: BLE001 - whatever the checkout's generator raises, said in one line
        print(json.dumps({"error": f"{type(e).__name__}: {str(e)[:500]}"}), flush=True)
