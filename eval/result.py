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
    """Milliseconds per call, timed by the trusted side's clock: median over batches of calls,
    each batch's time the slowest rank's."""

    median_ms: float
    min_ms: float
    max_ms: float
    batches: int
    calls_per_batch: int
    host_fraction: float | None = None  # share of a batch's wall time spent issuing the calls
    host_bound: bool | None = None  # host_fraction > 0.9: the GPU waited on the host for most of it


class Perf(BaseModel):
    reference: Timing
    candidate: Timing
    speedup: float  # median over interleaved pairs of (reference batch time / candidate batch time)
    speedup_ci: tuple[float, float] | None = None  # 95 % bootstrap interval of that median, widened to check_repro_pct
    check_repro_pct: float | None = None  # the hardware profile's measured run-to-run spread (each side), if any
    pairs: int = 0  # (reference batch, candidate batch) pairs timed, in alternating order
    verified_calls: int = 0  # timed calls whose output was checked against the reference
    timing_s: float = 0.0  # wall seconds of warm-up and timing
    graphs: bool = False  # both sides' batches timed as CUDA-graph replays (no Python while timed)
    graphs_note: str = ""  # why not, where they were not
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
    confinement: Literal["bwrap", "none"] | None = None  # how the candidate's processes were confined
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

    @property
    def conclusive(self) -> bool | None:
        """Whether the speedup's interval lies on one side of 1 (None without timing)."""
        if self.perf is None or self.perf.speedup_ci is None:
            return None
        lo, hi = self.perf.speedup_ci
        return hi < 1 or lo > 1
