from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from honestscale import catalogue
from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View, med

TOLERANCE = 0.01  # absolute accuracy (fraction)


def no_accuracy(workers: Iterable[int]) -> Said:
    return (
        f"no final accuracy at {', '.join(map(str, workers))} worker(s) of this scaling series",
        "record an eval event (test split) at the end of every run; train each scale to its target",
    )


def not_in_catalogue(mlperf: Mapping[str, object] | None, metric: str | None) -> Said:
    """An MLPerf benchmark (and round) the catalogue lacks, so the metric's direction is unknown."""
    info = mlperf or {}
    return (
        f"MLPerf benchmark {info.get('benchmark')!r} of round {info.get('round')} is not in the catalogue: "
        f"whether {metric} is better higher or lower is unknown",
        "add the benchmark to honestscale/catalogue/mlperf.toml (metric, direction, target, with its rule)",
    )


def worse_at_scale(
    metric: str | None, better: str, base: float, lo: int, top: float, hi: int, allowed: float
) -> Said:
    """The metric got worse from the smallest scale (``lo`` workers) to the largest (``hi``)."""
    verb = "falls" if better == "higher" else "rises"
    return (
        f"{metric or 'accuracy'} ({better} is better) {verb} from {base:.4f} at {lo} to {top:.4f} at {hi} "
        f"workers ({100 * abs(base - top):.1f} points; allowed {100 * allowed:.1f}: 1 point or the base's "
        "spread)",
        "retune for the larger batch (LR scaling and warm-up) or report the accuracy loss beside the speedup",
    )


class AccuracyIgnoredWhenScaling(Rule):
    """Scaling results must show accuracy at every scale, and accuracy must not fall as workers grow.

    What it checks: every worker count of a scaling series has a final accuracy, and the median final
    accuracy at the largest scale is not worse than the smallest scale's by more than 1 percentage point
    or the run-to-run spread of the smallest scale, whichever is larger. "Worse" reads the metric's
    direction from the benchmark catalogue: lower for accuracies, higher for word error rates and losses; an
    MLPerf benchmark the catalogue does not know cannot be verified (its direction is never guessed).
    Why it misleads: larger global batches and stale or compressed gradients buy speed with accuracy; a
    speedup quoted without accuracy at each scale hides that the faster model is a worse model (Hoefler
    2018, "ignore accuracy when scaling up").
    Example: ResNet-50 on 1, 8 and 64 GPUs at 76.1 %, 75.9 % and 72.3 % top-1, reported as "53x faster".
    Fix: record an evaluation at the end of every run (honestscale runners do), train every scale to the
    same target accuracy, and report accuracy beside every speedup.
    Reference: T. Hoefler, "Twelve ways to fool the masses when reporting performance of deep learning
    workloads", 2018, rule 1.
    """

    code = "HS101"
    name = "accuracy-ignored-when-scaling"
    old_names = ("ignore-accuracy-when-scaling",)  # until 0.2: an imperative, not the bad practice
    severity = "error"
    summary = "accuracy at every scale of a scaling series, and no drop as workers grow"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        points = target.by_workers()
        missing = {
            w: rs for w, rs in points.items() if not any(r.final_value is not None for r in rs if r.ok)
        }
        if missing:
            runs = [r for rs in missing.values() for r in rs]
            yield self.fail(target, runs, *no_accuracy(missing), workers_without_accuracy=list(missing))
            return
        first = next(r for rs in points.values() for r in rs if r.ok and r.final_value is not None)
        if not catalogue.quality_known(first.final_metric, first.mlperf):
            yield self.cannot_verify(
                target,
                [r for rs in points.values() for r in rs],
                *not_in_catalogue(first.mlperf, first.final_metric),
            )
            return
        acc = {w: med(r.final_value for r in rs if r.ok) for w, rs in points.items()}
        lo, hi = min(acc), max(acc)
        base, top = acc[lo], acc[hi]
        base_runs = [r.final_value for r in points[lo] if r.ok and r.final_value is not None]
        spread = max(base_runs) - min(base_runs) if len(base_runs) > 1 else 0.0
        allowed = max(TOLERANCE, spread)  # a drop within the base's run-to-run spread is not evidence
        # The direction comes from the benchmark catalogue: a word error rate or a loss that rises is the drop.
        metric, better = (
            first.final_metric,
            catalogue.direction(first.final_metric, first.mlperf),
        )
        if (
            base is not None
            and top is not None
            and _beyond(base - top if better == "higher" else top - base, allowed)
        ):
            yield self.fail(
                target,
                points[hi] + points[lo],
                *worse_at_scale(metric, better, base, lo, top, hi, allowed),
                median_accuracy_by_workers=acc,
                base_spread=round(spread, 4),
            )


def _beyond(drop: float, allowed: float) -> bool:
    """A drop more than ``allowed``: one that equals it but for the last bits of a float (0.76 - 0.75 is
    0.010000000000000009) is not more."""
    return drop > allowed and not math.isclose(drop, allowed, rel_tol=1e-9, abs_tol=1e-12)
