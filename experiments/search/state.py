"""The search's state, read back from its directory: finished samples and their re-checks."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.solve import SolveResult
from eval.result import CheckResult
from experiments.experiment import read_result


class VerifyResult(SolveResult):
    """A re-check's record (verify/sample_<k>/result.json): the same fields as a sample's, its
    check the re-check at `size`; both re-checks are in verify.json beside it."""

    status: Literal["verified", "verify_failed", "error"]


@dataclass
class Entry:
    """One finished sample, and its re-check once that has finished."""

    k: int
    result: SolveResult  # its check is the screen
    parent: int | None  # the sample it refined
    verify: dict | None = None  # {"default": CheckResult, "large": CheckResult}; {} when the re-check died

    @property
    def screen(self):
        c = self.result.check
        return c if self.result.correct and c is not None and c.perf is not None else None

    @property
    def screen_ms(self) -> float | None:
        return self.screen.perf.candidate.median_ms if self.screen else None

    @property
    def verified(self) -> bool:
        return bool(self.verify) and len(self.verify) == 2 and all(c.ok for c in self.verify.values())

    @property
    def verified_ms(self) -> float | None:
        return self.verify["default"].perf.candidate.median_ms if self.verified else None

    @property
    def time_ms(self) -> float | None:
        """What ranks it: the verified time once re-checked (None when the re-check failed), else the screen."""
        return self.verified_ms if self.verify is not None else self.screen_ms


class State:
    def __init__(self, root: Path):
        self.root = root
        self.entries: dict[int, Entry] = {}
        for d in sorted((root / "samples").glob("sample_*")):
            result = read_result(d)
            if result is not None:
                lineage = read_json(d / "lineage.json") or {}
                k = int(d.name.split("_")[1])
                self.entries[k] = Entry(k, result, lineage.get("refined"))
        for d in (root / "verify").glob("sample_*"):
            k = int(d.name.split("_")[1])
            if k in self.entries and read_result(d, VerifyResult) is not None:
                self.attach(k, d)

    def attach(self, k: int, folder: Path) -> None:

        data = read_json(folder / "verify.json") or {}
        self.entries[k].verify = {name: CheckResult.model_validate(c) for name, c in data.items()}

    @property
    def best(self) -> Entry | None:
        return min((e for e in self.entries.values() if e.verified), key=lambda e: e.verified_ms, default=None)

    @property
    def cost(self) -> float:
        return sum(e.result.cost_usd for e in self.entries.values())

    def improvements(self) -> set[int]:
        """The samples that beat every verified kernel of the samples before them."""
        out, low = set(), math.inf
        for k in sorted(self.entries):
            if self.entries[k].verified and self.entries[k].verified_ms < low:
                out.add(k)
                low = self.entries[k].verified_ms
        return out

    def needs_verify(self, e: Entry) -> bool:
        best = self.best
        return e.screen_ms is not None and e.verify is None and (best is None or e.screen_ms < best.verified_ms)

    def ranked(self) -> list[Entry]:
        """Correct kernels by time (fastest first), then those whose re-check failed."""
        ok = [e for e in self.entries.values() if e.screen is not None]
        return sorted(ok, key=lambda e: (e.time_ms is None, e.time_ms or 0.0, e.k))


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
