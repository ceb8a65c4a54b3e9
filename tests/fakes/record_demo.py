"""Records examples/all_reduce_cpu/: scripted model turns (served by the fake model server in
the OpenAI wire format) driven through the real agent loop, local sandbox and checker, on CPU
with gloo. `pkagent demo` replays its responses: the transcript goes to agent/demo.jsonl,
shipped in the package, and examples/all_reduce_cpu/transcript.jsonl links to it.

    .venv/bin/python tests/fakes/record_demo.py
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from fakes.model_server import FakeModelServer, Say  # noqa: E402
from fakes.scripts import CHECK, GLOO_ALL_REDUCE, write_command  # noqa: E402

FIRST = GLOO_ALL_REDUCE.replace("[:n].to(x.dtype).view_as(x)", "[:n].view_as(x)")

TURNS = [
    Say(
        "I'll start by reading the problem as the checker sees it and the baseline candidate, to get the "
        "exact signature and input sizes.",
        [("bash", {"command": "pkagent problems show all_reduce --as-candidate; ls -la"})],
        input=4210,
        output=95,
    ),
    Say(
        "This run is on CPU with gloo, so there is no CUDA and no symmetric memory: the data has to move "
        "with gloo's point-to-point calls. I'll write a two-shot all-reduce: each rank sends shard j of its "
        "tensor to rank j and sums the shards it receives in fp32 (a reduce-scatter), then the reduced "
        "shards are all-gathered. Every rank posts its sends and receives in the same peer order, so the "
        "exchange cannot deadlock.",
        [("bash", {"command": write_command(FIRST)})],
        input=512,
        cached=4210,
        output=610,
    ),
    Say("Now the checker, at a small size for a quick answer.", [("bash", {"command": CHECK})], input=96, cached=4722, output=64),
    Say(
        "The values are fine but the output is float32: I accumulate in fp32 and forgot to cast back to "
        "the input's dtype (bf16). Fixing the return line.",
        [
            (
                "bash",
                {
                    "command": "sed -i 's/\\[:n\\]\\.view_as(x)/[:n].to(x.dtype).view_as(x)/' solution.py && "
                    "grep -n 'return' solution.py"
                },
            )
        ],
        input=820,
        cached=4818,
        output=120,
    ),
    Say("Checking again.", [("bash", {"command": CHECK})], input=80, cached=5638, output=40),
    Say(
        "Correct on all 5 trials on both ranks. On CPU there is no timing to improve against, so I'm submitting.",
        [("submit", {})],
        input=790,
        cached=5718,
        output=45,
    ),
]


def main() -> None:
    from agent.solve import make_config, solve

    out = ROOT / "examples" / "all_reduce_cpu"
    shutil.rmtree(out, ignore_errors=True)
    with FakeModelServer() as server:
        os.environ["OPENAI_COMPATIBLE_API_KEY"] = server.api_key
        server.push(*TURNS)
        cfg = make_config(
            ["size=0.001", "check.perf=false"],
            problem="all_reduce",
            model="openai-compatible:scripted-demo",
            base_url=server.url + "/v1",
            mode="agent",
            device="cpu",
            world_size=2,
        )
        result = solve(cfg, out)
    shutil.rmtree(out / "work", ignore_errors=True)
    os.replace(out / "transcript.jsonl", ROOT / "agent" / "demo.jsonl")
    (out / "transcript.jsonl").symlink_to(Path("..", "..", "agent", "demo.jsonl"))
    print(result.status, result.correct, out)


if __name__ == "__main__":
    main()
