"""`pkagent search`: the fastest verified kernel for one problem, within a budget, unattended.

    parallel workers at once, each one sample of solve() (agent or zero-shot), run by the executors
    of `pkagent run` (local: a child process per sample, GPUs from the runner's pool; ray: one task
    per sample). A new sample starts from scratch, or (a `refine_fraction` of them) from the best
    kernel so far: its source, what the checker measured for it and its leaderboard place go into
    the prompt (SolveConfig.refine). Workers never see each other's transcripts.

    screen     every correct sample is timed once, reference and candidate in the same run: the
               trusted check of solve() on CUDA; on CPU, where solve() does not time, a second
               check with --perf. The leaderboard ranks by the best time known for each kernel.
    verify     a screened time below the best verified time earns a re-check before it can win:
               verify.trials correctness trials and verify.batches timed pairs at least, on fresh inputs
               (seed verify.seed + sample), at `size` and at size x verify.size_factor, each
               against the reference timed in the same run. Its verified time at `size` is the
               one that counts; a kernel that was fast only once is ranked by its verified time
               and does not win. The best is the fastest kernel correct in both re-checks.
    stop       no new sample once max_samples have started, budget_usd is spent, the best reaches
               target_roofline (fraction of the hardware roofline, CUDA) or target_speedup, or
               none of the last `patience` samples improved the best; running samples finish and
               are verified.

The search directory (OUT):

    search.json                     the config
    samples/sample_<k>/             a finished sample: transcript.jsonl, solution.py, result.json
                                    (its screen check), lineage.json (the sample it refined)
    verify/sample_<k>/              a finished re-check: solution.py, verify.json (both checks)
    best/                           solution.py and result.json (screen and verified checks)
    leaderboard.json, leaderboard.txt, progress.png

Samples and re-checks are written as `pkagent run` writes samples (a hidden folder renamed when
done); everything else is derived from them and rewritten atomically, so a search killed at any
moment resumes by rerunning the same command: finished samples and re-checks are kept, those in
flight are run again.
"""

from experiments.search.config import SearchConfig, VerifyConfig, load_search
from experiments.search.outputs import table
from experiments.search.policy import refines
from experiments.search.run import run_search

__all__ = ["SearchConfig", "VerifyConfig", "load_search", "refines", "run_search", "table"]
