"""The benchmark catalogue: what a quality metric means and what counts as reaching it.

Data, not code: ``mlperf.toml`` beside this module holds, per MLPerf benchmark and round, the quality
metric (name, unit, higher or lower is better, target), the result files of a submission and the runs
dropped at each end for its score, with the rules each value comes from. The collector writes a run's
target from it; the linter, the report and ``advise`` read a metric's direction and a run's targets
through :func:`direction`, :func:`targets` and :meth:`Metric.reached`, never by assuming "higher is better".

Peaks: ``peaks.toml`` holds the versioned, cited dense peak of each accelerator per data type, read through
:mod:`honestscale.catalogue.peaks` (MFU and HFU in ``analysis/flops.py``, judged by HS107).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Better = Literal["higher", "lower"]

# What a system description writes where it knows nothing: a field holding one of these records nothing
PLACEHOLDERS = frozenset({"", "todo", "tbd", "n/a", "na", "none", "unknown", "cpuname", "core_count"})


def placeholder(value: object) -> bool:
    """Whether ``value`` records nothing: absent, empty, or a placeholder word ("TODO", "N/A", "CPUName")."""
    return value is None or (isinstance(value, str) and value.strip().lower() in PLACEHOLDERS)


_ROUND = re.compile(r"(?:^|[^0-9.])v?(\d+)\.(\d+)(?:\.\d+)?$")


@dataclass(frozen=True)
class Metric:
    """One quality metric of a benchmark in one round."""

    name: str  # as honestscale calls it (eval events, reports)
    key: str  # sub-key of a dict-valued MLLOG value ("BBOX"), "" for a plain number
    log_key: str  # the MLLOG key that carries it
    unit: str
    better: Better
    target: float

    def reached(self, value: float) -> bool:
        return value >= self.target if self.better == "higher" else value <= self.target

    def describe(self) -> str:
        sign = ">=" if self.better == "higher" else "<="
        return f"{self.name} {sign} {self.target:g} ({self.better} is better)"


@dataclass(frozen=True)
class Benchmark:
    """An MLPerf benchmark as one round's rules define it."""

    suite: str  # training | hpc
    name: str
    round: str  # the round whose rules apply ("2.1"), as asked or the latest known
    task: str
    model: str
    dataset: str
    runs: int  # result files of a submission
    drop: int  # runs dropped at each end (fastest, slowest) before the mean
    metrics: tuple[Metric, ...]
    epoch_num: str = "epochs"  # what an evaluation's epoch_num counts: epochs, or samples (BERT)
    rule: str = ""  # where the values come from (rules section, mlperf-logging file)

    @property
    def max_non_converged(self) -> int:
        """Runs that did not converge count as infinitely slow: up to ``drop`` of them are dropped as the
        slowest; with more, the submission has no score."""
        return self.drop


def _round_key(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


@cache
def _data() -> dict[str, Any]:
    raw = resources.files("honestscale.catalogue").joinpath("mlperf.toml").read_text(encoding="utf-8")
    return tomllib.loads(raw)


def round_of(folder: str) -> str | None:
    """The MLPerf round named by a folder (``v2.0``, ``training_results_v2.1``, ``mlperf-training-v0.7``)."""
    m = _ROUND.search(folder)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def canonical(name: str, suite: str = "training") -> str | None:
    """The catalogue's name for a benchmark the logs call ``name`` (``mask`` is ``maskrcnn``, ``gnn`` is
    ``rgat``), or None if the catalogue does not know it."""
    entries = _data().get(suite, {})
    if name in entries:
        return name
    return next((key for key, entry in entries.items() if name in entry.get("aliases", ())), None)


def mlperf(name: str, round: str | None = None, suite: str = "training") -> Benchmark | None:
    """The benchmark ``name`` (or an alias of it) under the rules of ``round`` (the latest round's when None);
    None if unknown.

    A round before the benchmark's first entry gets None: its target is not in the catalogue.
    """
    known = canonical(name, suite)
    if known is None:
        return None
    entry = _data()[suite][known]
    versions = sorted(entry["quality"], key=lambda q: _round_key(q["since"]))
    if round is None:
        chosen = versions[-1]
    else:
        earlier = [q for q in versions if _round_key(q["since"]) <= _round_key(round)]
        if not earlier:
            return None
        chosen = earlier[-1]
    return Benchmark(
        suite=suite,
        name=known,
        round=round or chosen["since"],
        task=entry["task"],
        model=entry["model"],
        dataset=entry["dataset"],
        runs=int(entry["runs"]),
        drop=int(entry["drop"]),
        metrics=tuple(
            Metric(m["name"], m["key"], m["log_key"], m["unit"], m["better"], float(m["target"]))
            for m in chosen["metrics"]
        ),
        epoch_num=str(entry.get("epoch_num", "epochs")),
        rule=str(entry.get("rule", "")),
    )


def benchmarks(suite: str = "training") -> list[str]:
    """Names of the benchmarks the catalogue knows in ``suite``."""
    return sorted(_data().get(suite, {}))


def direction(metric: str | None, mlperf_info: Mapping[str, Any] | None = None) -> Better:
    """Whether ``metric`` improves upward or downward: from the run's MLPerf benchmark when it has one,
    else from the metric's name (losses, errors, perplexities and word error rates fall)."""
    bench = benchmark_of(mlperf_info)
    if bench is not None:
        for m in bench.metrics:
            if m.name == metric:
                return m.better
    name = (metric or "").lower()
    lower = _data()["metrics"]["lower_is_better"]
    return "lower" if any(word in name for word in lower) else "higher"


def quality_known(metric: str | None, mlperf_info: Mapping[str, Any] | None) -> bool:
    """Whether the direction of ``metric`` is known: always for honestscale's own runs (from the metric's
    name), for a run read from an MLPerf log only when the catalogue has its benchmark, round and metric."""
    if not mlperf_info or not mlperf_info.get("benchmark"):
        return True
    bench = benchmark_of(mlperf_info)
    return bench is not None and any(m.name == metric for m in bench.metrics)


def benchmark_of(mlperf_info: Mapping[str, Any] | None) -> Benchmark | None:
    """The benchmark a run's ``mlperf`` run_start field names (benchmark, round, suite), if the catalogue has it."""
    if not mlperf_info or not mlperf_info.get("benchmark"):
        return None
    return mlperf(
        str(mlperf_info["benchmark"]),
        mlperf_info.get("round"),
        str(mlperf_info.get("suite") or "training"),
    )


def targets(
    target_metric: str | None, stop_value: float | None, mlperf_info: Mapping[str, Any] | None = None
) -> tuple[Metric, ...]:
    """The targets a run must reach: every metric of its MLPerf benchmark, else its own one
    (``target_metric`` and ``stop_value`` from run_start, direction from the metric's name)."""
    bench = benchmark_of(mlperf_info)
    if bench is not None:
        return bench.metrics
    if stop_value is None:
        return ()
    name = target_metric or "accuracy"
    better = direction(name)
    return (Metric(name, "", "", "", better, float(stop_value)),)
