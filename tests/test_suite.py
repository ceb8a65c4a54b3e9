"""The problem suite: metadata, every reference on CPU/gloo at world sizes 2 and 4, rooflines.

All problems of one world size run in ONE spawn (one process group), so the whole file stays
fast on a two-core CI machine. Each rank records, per problem, what went wrong (or nothing);
the tests then assert per problem.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import time
import traceback

import deadlines
import pytest
import torch

from eval.problem import CATEGORIES, Roofline, all_problems, load_problem

# A size small enough for two CPU cores: every problem's dimensions shrink with it.
CI_SIZE = 2.0**-12
WORLD_SIZES = (2, 4)
SPAWN_DEADLINE_S = deadlines.scaled(240)

PROBLEMS = all_problems()
IDS = [p.id for p in PROBLEMS]


# 1. Metadata ---------------------------------------------------------------------------------


def test_suite_is_broad():
    assert len(PROBLEMS) >= 40, f"only {len(PROBLEMS)} problems"
    cats = {p.meta.category for p in PROBLEMS}
    assert len(cats) >= 9, f"only {len(cats)} categories: {sorted(cats)}"
    assert len({p.id for p in PROBLEMS}) == len(PROBLEMS)


@pytest.mark.parametrize("pid", IDS)
def test_metadata(pid):
    p = load_problem(pid)
    m = p.meta
    assert os.path.basename(p.path) == f"{pid}.py"
    assert m.category in CATEGORIES
    for field in ("name", "source_repo", "source_file", "source_function"):
        assert getattr(m, field).strip(), f"{pid}: empty {field}"
    assert "/" in m.source_repo, f"{pid}: source_repo should be owner/name"
    assert 2 in m.world_sizes and 4 in m.world_sizes, f"{pid}: CI runs world sizes 2 and 4"
    assert all(w in (1, 2, 4, 8, 16) for w in m.world_sizes)
    assert len(p.description) > 80, f"{pid}: the docstring is the problem statement"
    for w in m.world_sizes:
        for size in (1.0, CI_SIZE):
            r = p.roofline(w, size)
            assert isinstance(r, Roofline)
            for name in ("link_bytes", "hbm_bytes", "flops"):
                v = float(getattr(r, name))
                assert math.isfinite(v) and v >= 0, f"{pid} w={w} size={size}: {name}={v}"
            assert r.link_bytes > 0 and r.hbm_bytes > 0, f"{pid} w={w}: a distributed problem moves data"
        # the default size must matter on an H200: at least ~10 us of link, HBM or compute time
        t = p.roofline(w, 1.0).seconds(link_gbs=400, hbm_gbs=4000, tflops=800)
        assert t["bound"] > 1e-5, f"{pid} w={w}: default size too small ({t})"


def test_size_shrinks_inputs():
    """The CI size must shrink each problem's inputs well below the default."""
    # Checked on the roofline (no process group needed): HBM bytes fall with size.
    for p in PROBLEMS:
        big, small = p.roofline(2, 1.0), p.roofline(2, CI_SIZE)
        assert small.hbm_bytes * 50 < big.hbm_bytes, f"{p.id}: size barely shrinks the problem"


# 2. Every reference on gloo -----------------------------------------------------------------


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _tensors(obj):
    """The tensors of an input or output structure, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for k in sorted(obj) for t in _tensors(obj[k])]
    return []


def _same(a, b) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    if type(a) is not type(b) or len(ta) != len(tb):
        return False
    return all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb))


def _run_one(prob, rank, w) -> str:
    """Check one problem on this rank; return '' or what is wrong."""
    import torch.distributed as dist

    inp1 = prob.make_inputs(rank, w, 1, "cpu", CI_SIZE)
    if not isinstance(inp1, tuple):
        return "make_inputs must return a tuple"
    before = [t.clone() for t in _tensors(inp1)]
    out1 = prob.reference(*inp1)
    if not all(torch.equal(x, y) for x, y in zip(before, _tensors(inp1))):
        return "reference modified its inputs"
    again = prob.make_inputs(rank, w, 1, "cpu", CI_SIZE)
    if not _same(inp1, again):
        return "make_inputs is not deterministic in the seed"
    out1b = prob.reference(*again)
    if not _same(out1, out1b):
        return "reference is not deterministic for the same inputs"
    inp2 = prob.make_inputs(rank, w, 2, "cpu", CI_SIZE)
    pairs = list(zip(_tensors(inp1), _tensors(inp2)))
    if not pairs:
        return "no tensor input"
    if all(x.shape == y.shape and torch.equal(x, y) for x, y in pairs):
        return "a different seed gives the same inputs"
    for x in _tensors(inp1):
        if x.is_floating_point() and x.numel() > 1 and bool((x == x.reshape(-1)[0]).all()):
            return f"constant input of shape {tuple(x.shape)}"
    outs = _tensors(out1)
    for t in outs:
        if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t.float() if not t.is_complex() else t).all()):
            return f"non-finite output of shape {tuple(t.shape)}"
    # every rank agrees on how many ranks produced an output; at least one did
    have = torch.tensor([1 if outs else 0])
    dist.all_reduce(have)
    if int(have) == 0:
        return "no rank returned an output"
    return ""


def _worker(rank, w, port, out_dir):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=w, timeout=datetime.timedelta(seconds=deadlines.scaled(90)))
    results = {}
    for prob in all_problems():
        if w not in prob.meta.world_sizes:
            continue
        t0 = time.perf_counter()
        try:
            err = _run_one(prob, rank, w)
        except Exception:  # recorded, then the other ranks' collectives may fail too
            err = traceback.format_exc(limit=4)[-1500:]
        results[prob.id] = {"error": err, "seconds": time.perf_counter() - t0}
        dist.barrier()
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


_CACHE: dict[int, dict] = {}


def _results(w, tmp_path_factory) -> dict:
    if w not in _CACHE:
        import torch.multiprocessing as mp

        out_dir = str(tmp_path_factory.mktemp(f"suite_w{w}"))
        ctx = mp.start_processes(_worker, args=(w, _free_port(), out_dir), nprocs=w, join=False, start_method="spawn")
        deadline = time.time() + SPAWN_DEADLINE_S
        crashed = ""
        while time.time() < deadline:
            try:
                if ctx.join(timeout=2):
                    break
            except Exception as e:  # a rank died: keep what was recorded
                crashed = str(e)[-2000:]
                break
        else:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            crashed = f"spawn did not finish within {SPAWN_DEADLINE_S:.0f} s"
        per_rank = []
        for r in range(w):
            path = os.path.join(out_dir, f"rank{r}.json")
            per_rank.append(json.load(open(path)) if os.path.exists(path) else {})
        _CACHE[w] = {"ranks": per_rank, "crashed": crashed}
    return _CACHE[w]


@pytest.mark.parametrize("w", WORLD_SIZES)
@pytest.mark.parametrize("pid", IDS)
def test_reference_on_gloo(pid, w, tmp_path_factory):
    if w not in load_problem(pid).meta.world_sizes:
        pytest.skip(f"{pid} does not support world size {w}")
    res = _results(w, tmp_path_factory)
    errors = []
    for r, per in enumerate(res["ranks"]):
        if pid not in per:
            errors.append(f"rank {r}: never finished ({res['crashed'] or 'an earlier problem hung'})")
        elif per[pid]["error"]:
            errors.append(f"rank {r}: {per[pid]['error']}")
    assert not errors, "\n".join(errors)


# The checker, with each reference as its own candidate ----------------------------------------


@pytest.mark.parametrize("pid", IDS)
def test_reference_passes_checker(pid, tmp_path):
    # The candidate `pkagent problems show ID --as-candidate` prints: the honest starting point.
    from eval.check import check
    from eval.cli import candidate_source
    from eval.problem import load_problem

    cand = tmp_path / f"{pid}_ref.py"
    cand.write_text(candidate_source(load_problem(pid)))
    res = check(str(cand), pid, world_size=2, device="cpu", trials=2, perf=False, size=CI_SIZE, timeout=deadlines.scaled(120))
    assert res.status == "correct", f"{res.status}: {res.message}\n{res.log_tail[-2000:]}"


# 3. Two rooflines against a hand calculation ------------------------------------------------


def test_roofline_row_parallel_linear_by_hand():
    # row_parallel_linear at world size 4, default size: M = 8192 tokens, K = 16384, N = 8192.
    # link: all-reduce of the M x N bf16 output, 2 (W-1)/W of it:
    #       8192 * 8192 * 2 B = 134,217,728 B; * 2 * 3/4 = 201,326,592 B.
    # HBM:  x shard 8192 * 4096 * 2 = 67,108,864; weight shard 8192 * 4096 * 2 = 67,108,864;
    #       bias 8192 * 2 = 16,384; output 134,217,728: total 268,451,840 B.
    # FLOPs: 2 * 8192 * 8192 * 4096 = 549,755,813,888.
    r = load_problem("row_parallel_linear").roofline(4, 1.0)
    assert r.link_bytes == pytest.approx(201_326_592)
    assert r.hbm_bytes == pytest.approx(268_451_840)
    assert r.flops == pytest.approx(549_755_813_888)


def test_roofline_vocab_parallel_cross_entropy_by_hand():
    # vocab_parallel_cross_entropy at world size 2, default size: T = 16384 tokens, V = 131072.
    # link: whatever the algorithm, a rank must receive the other ranks' combined
    #       log-sum-exp of each token (4 B) and, for the half of the targets it does not own,
    #       the target logit (4 B): 16384 * 4 * (1 + 1/2) = 98,304 B.
    # HBM:  read the T x V/W bf16 logits shard once: 16384 * 65536 * 2 = 2,147,483,648 B, plus
    #       targets 16384 * 8 = 131,072 and the fp32 loss 16384 * 4 = 65,536: 2,147,680,256 B.
    # FLOPs: about 3 per logit (subtract, exp, add): 3 * 16384 * 65536 = 3,221,225,472.
    r = load_problem("vocab_parallel_cross_entropy").roofline(2, 1.0)
    assert r.link_bytes == pytest.approx(98_304)
    assert r.hbm_bytes == pytest.approx(2_147_680_256)
    assert r.flops == pytest.approx(3_221_225_472)


def test_docs_table_is_current():
    """docs/problems.md is generated by `python -m eval.problems._doc`; it must list the suite."""
    import contextlib
    import io
    from pathlib import Path

    from eval.problems import _doc

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _doc.main()
    path = Path(__file__).resolve().parents[1] / "docs" / "problems.md"
    assert path.read_text().strip() == buf.getvalue().strip(), "run: python -m eval.problems._doc > docs/problems.md"
    for pid in IDS:
        assert f"| `{pid}` |" in buf.getvalue()
