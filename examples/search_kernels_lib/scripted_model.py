"""A scripted model for `pkagent search`: the fake model server of tests/fakes, answering each
request with a kernel chosen by what the request asks.

    a sample from scratch      gets scratch[i] for the i-th such request (cycling)
    a sample that refines K    gets the rung of `ladder` after K (the last rung stays the last;
                               a kernel not on the ladder gets the first rung)

Each kernel names itself in a line `# kernel: NAME`; the refinement section of the prompt
carries the source of the kernel to refine, so the server reads K from there. A reply holds the
whole candidate: a python block (zero-shot) or one turn that writes solution.py and submits
(agent). `None` in `scratch` is a reply without code. `{COUNTER}` and `{FAST_CHECKS}` in a
kernel are filled in (kernels/fast_once.py uses them: fast in its first FAST_CHECKS checks only).

Run a search against it (examples/search_kernels_lib/run.sh does, on two GPUs):

    python examples/search_kernels_lib/scripted_model.py --kernels examples/search_kernels_lib/kernels \\
        --out runs/search/kernels_lib -- --config kernels_lib_gpu
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.model_server import FakeModelServer, Say  # noqa: E402

REFINE_HEADING = "## Start from the best kernel so far"
NAME = re.compile(r"# kernel: ([A-Za-z0-9_.-]+)")
SPEC = "anthropic:claude-haiku-4-5"  # the wire format served; its price makes the cost non-zero


def name_of(source: str | None) -> str | None:
    m = NAME.search(source or "")
    return m.group(1) if m else None


class LadderServer(FakeModelServer):
    def __init__(self, scratch: list[str | None], ladder: list[str], **kw):
        super().__init__(**kw)
        self.scratch, self.ladder = scratch, ladder
        self.rungs = [name_of(s) for s in ladder]
        self.asked: list[tuple[str | None, str | None]] = []  # (kernel refined, kernel served) per request
        self._route = threading.Lock()

    def answer(self, path, headers, raw):
        body = json.loads(raw or b"{}")
        text = json.dumps(body)
        at = text.find(REFINE_HEADING)
        refined = NAME.search(text, at).group(1) if at >= 0 and NAME.search(text, at) else None
        with self._route:
            if refined is None:
                code = self.scratch[sum(r is None for r, _ in self.asked) % len(self.scratch)]
            else:
                i = self.rungs.index(refined) + 1 if refined in self.rungs else 0
                code = self.ladder[min(i, len(self.ladder) - 1)]
            self.asked.append((refined, name_of(code)))
            if body.get("tools"):  # agent: write solution.py and submit, in one turn
                calls = (
                    [("bash", {"command": f"cat > solution.py <<'EOF'\n{code}EOF\n"}), ("submit", {})]
                    if code
                    else [("submit", {})]
                )
                say = Say("Writing solution.py and submitting.", calls, input=3000, output=400)
            else:
                say = Say(
                    f"Here it is:\n\n```python\n{code}```\n" if code else "I cannot write this one.", input=1000, output=200
                )
            self.script.append(say)
        return super().answer(path, headers, raw)


def kernels(folder: Path, counter: Path, fast_checks: int) -> dict[str, str]:
    """NAME -> source of every kernel file in `folder`, placeholders filled in."""
    out = {}
    for p in sorted(folder.glob("*.py")):
        text = p.read_text().replace("{COUNTER}", str(counter)).replace("{FAST_CHECKS}", str(fast_checks))
        out[name_of(text) or p.stem] = text
    return out


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=Path, required=True, help="folder of kernels; its ladder.json names scratch and ladder")
    ap.add_argument("--out", type=Path, required=True, help="the search directory")
    ap.add_argument(
        "--fast-checks",
        type=int,
        default=1,
        help="checks in which fast_once is fast (CUDA 1: the screen is solve()'s check; CPU 2: solve()'s check, then the screen)",
    )
    ap.add_argument("search_args", nargs=argparse.REMAINDER, help="after --: more arguments of pkagent search")
    args = ap.parse_args(argv)
    order = json.loads((args.kernels / "ladder.json").read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    src = kernels(args.kernels, args.out.resolve() / "fast_once.count", args.fast_checks)
    with LadderServer(
        [src[n] for n in order["scratch"]], [src[n] for n in order["ladder"]], api_key="sk-scripted-0123456789"
    ) as server:
        cmd = [
            sys.executable,
            "-m",
            "pkagent",
            "search",
            "--model",
            SPEC,
            "--base-url",
            server.url,
            "--out",
            str(args.out),
            *[a for a in args.search_args if a != "--"],
        ]
        code = subprocess.run(cmd, env=dict(os.environ, ANTHROPIC_API_KEY=server.api_key)).returncode
        old = (
            json.loads((args.out / "scripted_requests.json").read_text())
            if (args.out / "scripted_requests.json").exists()
            else []
        )
        (args.out / "scripted_requests.json").write_text(
            json.dumps(old + [{"refined": r, "served": s} for r, s in server.asked], indent=2) + "\n"
        )
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
