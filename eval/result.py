"""CheckResult: what one `pkagent check` concludes, as a pydantic model (the last JSON line)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Status = Literal[
    "correct",
    "incorrect",
    "compile_error",
    "import_error",
    "runtime_error",
    "timeout",
    "cheating_detected",
    "refused",
]


class RankDetail(BaseModel):
    rank: int
    ok: bool
    trial: int | None = None  # the trial that failed, if any
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    first_mismatch: list[int] | None = None  # index of the first element out of tolerance
    output_path: str = ""  # where in the output structure, e.g. "[1]" or "['logits']"


class Timing(BaseModel):
    """Milliseconds per call; median over batches of calls, max over ranks."""

    median_ms: float
    min_ms: float
    max_ms: float
    batches: int
    calls_per_batch: int


class Perf(BaseModel):
    reference: Timing
    candidate: Timing
    speedup: float  # reference median / candidate median
    # From the problem's roofline and a hardware profile (GPU runs of problems that have one):
    roofline_ms: float | None = None  # the lower-bound time
    roofline_terms_ms: dict[str, float] = Field(default_factory=dict)  # link, hbm, compute
    reference_roofline_fraction: float | None = None  # roofline_ms / reference median
    candidate_roofline_fraction: float | None = None
    hardware: str | None = None


class Phases(BaseModel):
    """Wall seconds of each phase of the check, as seen by the checker's parent process."""

    startup_s: float = 0.0
    correctness_s: float = 0.0
    timing_s: float = 0.0
    total_s: float = 0.0


class CheckResult(BaseModel):
    status: Status
    problem: str
    candidate: str
    world_size: int
    device: Literal["cuda", "cpu"]
    trials: int
    trials_passed: int = 0
    message: str = ""  # one line: what happened and what to do next
    ranks: list[RankDetail] = Field(default_factory=list)
    stuck_ranks: list[int] = Field(default_factory=list)  # on timeout: ranks that never finished
    collectives: dict[str, int] = Field(default_factory=dict)  # torch.distributed calls by the candidate
    perf: Perf | None = None
    phases: Phases = Field(default_factory=Phases)
    log_tail: str = ""  # the end of the rank processes' output on failure

    @property
    def ok(self) -> bool:
        return self.status == "correct"
