"""Statistical vs hardware efficiency (Deep500; Hoefler 2018, "ignore accuracy when scaling up").

Time to accuracy = (time per sample) x (samples to reach the target). Scaling out usually makes each sample
faster (hardware efficiency) and needs more samples to reach the same accuracy (statistical efficiency: a
larger global batch learns less per sample). Per worker count of a series this module gives both factors
over the base case, each the ratio of medians over the repetitions with its bootstrap interval, so that

    time speedup = hardware factor / statistical factor

for the point estimates of a point whose runs all need the same number of samples (and close to it otherwise).

Samples to target: every rank's samples trained up to the first evaluation at which every target is reached
(from the step events); for MLPerf logs, that evaluation's ``epoch_num`` times ``train_samples`` (BERT logs
samples in ``epoch_num`` itself: see the catalogue).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from honestscale import catalogue
from honestscale.analysis.scaling import reached_at, time_to_accuracy
from honestscale.analysis.stats import Estimate, centre_of_times, median_ci, ratio
from honestscale.view import Run


def samples_to_target(run: Run) -> float | None:
    """Samples of every rank trained when the run first reached all its targets (None: not reached, or unknown)."""
    t = reached_at(run)
    if t is None:
        return None
    there = [e for e in run.evals if e.time == t and e.split == "validation"]
    trained = [e.samples_trained for e in there if e.samples_trained]
    if trained:
        return float(max(trained))
    epochs = [e.epoch for e in there if e.epoch is not None]
    if not epochs:
        return None
    bench = catalogue.benchmark_of(run.mlperf)
    if bench is not None and bench.epoch_num == "samples":
        return float(max(epochs))
    size = run.train_size
    return float(max(epochs)) * float(size) if size else None


def time_per_sample(run: Run) -> float | None:
    """Time to accuracy over samples to target, seconds per sample."""
    t, n = time_to_accuracy(run), samples_to_target(run)
    return t / n if t is not None and n else None


def _values(runs: Sequence[Run], f: Callable[[Run], float | None]) -> list[float]:
    return [float(v) for v in (f(r) for r in runs if r.ok) if v]


@dataclass(frozen=True)
class Factors:
    """One worker count: its time per sample and samples to target (medians, 95 % intervals), and the two
    factors against the base case."""

    workers: int
    base_workers: int
    runs: int  # successful runs with both numbers
    time_per_sample_s: float | None
    time_per_sample_ci: tuple[float | None, float | None]
    samples: float | None
    samples_ci: tuple[float | None, float | None]
    hardware: Estimate | None  # base time per sample / this one: > 1 means each sample got faster
    statistical: Estimate | None  # this one's samples / the base's: > 1 means more samples were needed
    time_speedup: Estimate | None  # median time to accuracy of the base / of this one

    def sentence(self) -> str:
        """'2x the workers made each sample 1.80x faster (factor 1.80, 95 % CI ...) but needed 1.30x the samples
        (factor ...); time to accuracy 1.38x faster (factor ...)', each factor with its interval and, where the
        interval holds 1, "not significantly different from 1"."""
        if self.hardware is None or self.statistical is None:
            return f"{self.workers} workers: not every run has a time to accuracy and samples to target"
        scale = self.workers / self.base_workers
        h, st = self.hardware.value, self.statistical.value
        each = f"{h:.2f}x faster" if h >= 1 else f"{1 / h:.2f}x slower"
        need = f"but needed {st:.2f}x the samples" if st >= 1 else f"and needed only {st:.2f}x the samples"
        total = self.time_speedup.value if self.time_speedup is not None else h / st
        overall = f"{total:.2f}x faster" if total >= 1 else f"{1 / total:.2f}x slower"
        return (f"{scale:g}x the workers made each sample {each}{_interval(self.hardware)} {need}"
                f"{_interval(self.statistical)}; time to accuracy {overall}{_interval(self.time_speedup)}")  # fmt: skip


def _interval(e: Estimate | None) -> str:
    """The factor's 95 % interval, and whether it excludes 1 (no change): a factor is a claim only then."""
    if e is None or e.low is None or e.high is None:
        return " (no interval: too few runs)"
    unsure = "; not significantly different from 1" if e.low <= 1.0 <= e.high else ""
    return f" (factor {e.value:.2f}, 95 % CI {e.low:.2f}-{e.high:.2f}{unsure})"


def factors(points: dict[int, list[Run]]) -> list[Factors]:
    """Every worker count of a series (``points``: workers -> runs), the base (the smallest) first; none when no
    point after the base has both factors (no time to accuracy, or no samples to target)."""
    if not points:
        return []
    ws = sorted(points)
    base = points[ws[0]]
    b_tps, b_samples, b_tta = (
        _values(base, f) for f in (time_per_sample, samples_to_target, time_to_accuracy)
    )
    one = Estimate(1.0) if b_tps and b_samples else None
    out = []
    for w in ws:
        runs = points[w]
        tps, samples = _values(runs, time_per_sample), _values(runs, samples_to_target)
        out.append(
            Factors(
                workers=w, base_workers=ws[0], runs=min(len(tps), len(samples)),
                time_per_sample_s=centre_of_times(tps), time_per_sample_ci=median_ci(tps),
                samples=centre_of_times(samples), samples_ci=median_ci(samples),
                # the base case against itself is 1 by definition: no interval
                hardware=one if w == ws[0] else ratio(b_tps, tps, "median"),
                statistical=one if w == ws[0] else ratio(samples, b_samples, "median"),
                time_speedup=one if w == ws[0] else ratio(b_tta, _values(runs, time_to_accuracy), "median"),
            )
        )  # fmt: skip
    return out if any(f.hardware is not None and f.statistical is not None for f in out[1:]) else []
