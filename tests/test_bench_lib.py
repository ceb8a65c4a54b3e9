"""kernels_lib's bench table: which time a floor is judged on, and like-with-like ratios."""

from kernels_lib.bench import KIB, MIB, table


def row(impl, kind, us, graph_us=None, op="all_reduce", size=16 * KIB, **kw):
    r = {"op": op, "size": size, "impl": impl, "kind": kind, "us": us, "p10_us": us, "p90_us": us, "host_us": us}
    if graph_us is not None:
        r.update(graph_us=graph_us, graph_p10_us=graph_us, graph_p90_us=graph_us)
    return r | kw


def ours_line(rows):
    return next(line for line in table(rows).splitlines() if "| mine" in line)


def test_floor_on_graph_time_and_must_beat_torch():
    rows = [row("mine", "ours", 16.0, 6.0, graph_correct=True), row("t", "torch", 11.0, 7.0), row("n", "nccl", 40.0)]
    line = ours_line(rows)
    assert line.endswith("| <= 8 us, < torch | yes |")
    assert "| 2.50 / - |" in line  # NCCL not captured: no graph ratio against it
    assert "| 0.69 / 1.17 |" in line  # eager vs eager, graph vs graph
    rows[1]["graph_us"] = 5.0  # torch faster in the same mode: the floor is not met
    assert ours_line(rows).endswith("| no |")


def test_wrong_replays_are_not_a_time():
    rows = [row("mine", "ours", 16.0, 6.0, graph_correct=False), row("t", "torch", 11.0, 7.0)]
    line = ours_line(rows)
    assert "6.0 WRONG in replays" in line
    assert line.endswith("| no (eager) |")  # judged on the eager 16 us


def test_bandwidth_floor_and_uncaptured():
    rows = [row("mine", "ours", 200.0, op="all_gather", size=64 * MIB, graph_error="RuntimeError: nope", busbw_GBps=335.0)]
    line = ours_line(rows)
    assert "not captured: RuntimeError: nope" in line and line.endswith("| >= 340 GB/s | no (eager) |")


def test_floors_only_at_their_world_size():
    rows = [row("mine", "ours", 6.0, 2.0, graph_correct=True, world=1)]
    assert ours_line(rows).endswith("|  |  |")  # one GPU: no floor, nothing judged
    rows[0]["world"] = 2
    assert ours_line(rows).endswith("| <= 8 us, < torch | no |")  # no torch op in the same run: not shown faster
