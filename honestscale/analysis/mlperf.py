"""MLPerf submissions: the runs of one round, organisation, system and benchmark, scored by its rules.

A submission is the folder of result logs ``<round>/<org>/results/<system>/<benchmark>/``; its score is
the olympic mean of its runs' times to train with as many runs dropped at each end as the benchmark's
rules say (the catalogue: 1, or 4 for unet3d), a run that did not converge counting as infinitely slow.
The official summarizer then multiplies by the submission's ``scaling.json`` factor (set in review when a
submission converged in fewer epochs than the reference; the collector records it with each run);
:attr:`Submission.scaled_s` is that product.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from honestscale import catalogue
from honestscale.analysis.stats import mlperf_score
from honestscale.view import Run


def rules_of(run: Run) -> catalogue.Benchmark | None:
    """The catalogue's entry for a run read from an MLPerf log (None for other runs, or unknown benchmarks)."""
    return catalogue.benchmark_of(run.mlperf)


def drop_for(runs: Iterable[Run]) -> int:
    """Runs dropped at each end for the score of ``runs``: their benchmark's rule when they share one, else 1."""
    drops = {b.drop if (b := rules_of(r)) else 1 for r in runs}
    return drops.pop() if len(drops) == 1 else 1


@dataclass(frozen=True)
class Submission:
    folder: str  # run id without the result file: mlperf:<round>/<org>/<system>/<benchmark>
    rules: catalogue.Benchmark | None
    run_ids: tuple[str, ...]
    times_s: tuple[float | None, ...]  # time to train per run; None: did not converge
    drop: int
    score_s: float | None
    scaling_factor: float | None
    note: str

    @property
    def scaled_s(self) -> float | None:
        return None if self.score_s is None else self.score_s * (self.scaling_factor or 1.0)


def submission_of(run: Run) -> str:
    """The submission a run of an MLPerf log belongs to: its id without the result file."""
    return run.id.rsplit("/", 1)[0]


def scaling_factor(runs: Iterable[Run]) -> float | None:
    """The review scaling factor of the submission of ``runs``, as the collector read it from its ``scaling.json``;
    None when there is none, or when the runs come from submissions with different factors."""
    factors = {(r.mlperf or {}).get("scaling_factor") for r in runs}
    if len(factors) != 1:
        return None
    (factor,) = factors
    return float(factor) if isinstance(factor, int | float) else None


def submissions(runs: Iterable[Run]) -> list[Submission]:
    """Every MLPerf submission among ``runs``, with its score or the reason it has none."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if r.source == "mlperf":
            groups[submission_of(r)].append(r)
    out = []
    for folder, group in sorted(groups.items()):
        group.sort(key=lambda r: r.id)
        rules = rules_of(group[0])
        drop = rules.drop if rules else 1
        times = tuple(float(r.time_to_train_s) if r.ok and r.time_to_train_s else None for r in group)
        score = mlperf_score(times, drop)
        failed = sum(t is None for t in times)
        expected = f" of the {rules.runs} the rules ask" if rules and rules.runs != len(group) else ""
        if score is not None:
            note = (
                f"olympic mean of {len(group) - 2 * drop} of {len(group)} runs{expected} ({drop} dropped at each end"
                + (f"; {failed} that did not converge among the slowest dropped" if failed else "")
                + ")"
            )
        elif len(group) < 2 * drop + 1:
            note = f"no score: {len(group)} runs{expected}, fewer than the {2 * drop + 1} dropping {drop} at each end needs"
        else:
            note = f"no score: {failed} of {len(group)} runs did not converge, more than the {drop} the rules drop"
        out.append(
            Submission(
                folder, rules, tuple(r.id for r in group), times, drop, score, scaling_factor(group), note
            )
        )
    return out
