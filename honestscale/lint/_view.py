"""The read-only view the rules check: runs, their evaluations and steps, and the comparisons they form.

Built once from the store's typed queries; rules never see SQL. A *comparison* is a group of
final runs a reader would compare:

* ``config``: repetitions of one configuration point (same campaign, model, dataset, framework,
  accelerators, workers and global batch);
* ``scaling``: one model, dataset and framework across two or more worker counts, with its
  scaling mode derived from the batches: ``strong`` (global batch constant), ``weak`` (batch per
  worker constant) or ``mixed``;
* ``framework``: one model and dataset at one worker count, across frameworks (HS104 checks the hardware);
* ``hardware``: one model, dataset and framework across accelerator models;
* ``campaign``: every run of a campaign, tuning and failed ones included.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from honestscale.store import Connection, queries

COMPARED = ("final", "baseline")  # tuning and smoke runs are context, not results


@dataclass(frozen=True)
class Eval:
    split: str
    metric: str
    value: float
    time: float
    epoch: int | None
    samples_trained: float | None = None  # samples every rank had trained by then (from the steps)


@dataclass(frozen=True)
class PowerSample:
    """One NVML reading of one accelerator: its power draw and its total-energy counter, either may be missing."""

    rank: int
    device: int  # -1: the sample names no device
    time: float
    power_w: float | None
    energy_j: float | None


@dataclass(frozen=True)
class Steps:
    steps: int
    warmup_steps: int
    warmup_marked: int
    steps_with_data: int
    median_step_s: float | None
    first_steps_max_s: float | None
    first_unmarked_max_s: float | None
    # synchronous steps (slowest rank per step), warm-up excluded; None when the run has no such step
    sync_steps: int | None = None
    sync_median_s: float | None = None
    fence_s: float | None = None  # Tukey's upper fence, Q3 + 1.5 IQR
    samples_per_step: float | None = None  # median samples of all ranks per step
    step_time_s: float | None = None  # sum of the synchronous steps
    samples_timed: float | None = None  # samples of those steps
    outliers: int | None = None  # steps above the fence
    outlier_excess_s: float | None = None  # their time beyond the median step
    slowest_step_s: float | None = None
    samples_trained: float | None = None  # every step, warm-up included


@dataclass(frozen=True)
class Run:
    """One run as the rules see it: the ``runs`` row, its evaluations, step statistics and run_start."""

    row: dict[str, Any]
    evals: tuple[Eval, ...] = ()
    steps: Steps | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    power: tuple[PowerSample, ...] = ()  # in time order per rank and device

    def __getattr__(self, name: str) -> Any:
        try:
            return self.row[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def id(self) -> str:
        return str(self.row["run_id"])

    @property
    def workers(self) -> int | None:
        n = self.row.get("n_accelerators") or self.row.get("world_size")
        return int(n) if n else None

    @property
    def ok(self) -> bool:
        return self.row.get("status") == "success"

    @property
    def throughput(self) -> float | None:
        """Samples/s over the run's timed steps: samples of every rank over the synchronous steps' time
        (warm-up excluded, stalls included)."""
        s = self.steps
        if s is None or not s.step_time_s or not s.samples_timed:
            return None
        return s.samples_timed / s.step_time_s

    @property
    def steady_rate(self) -> float | None:
        """Steady-state throughput, samples/s: samples per step over the median synchronous step (warm-up
        excluded), which stalls and outliers do not move."""
        s = self.steps
        if s is None or not s.sync_median_s or not s.samples_per_step:
            return None
        return s.samples_per_step / s.sync_median_s

    @property
    def end_to_end_rate(self) -> float | None:
        """Samples trained over the time to train (evaluations, stalls and warm-up included)."""
        s, t = self.steps, self.row.get("time_to_train_s")
        if s is None or not s.samples_trained or not t:
            return None
        return float(s.samples_trained) / float(t)

    @property
    def stall_share(self) -> float | None:
        """The outlier steps' time beyond the median step, as a share of the time to train."""
        s, t = self.steps, self.row.get("time_to_train_s")
        if s is None or s.outlier_excess_s is None or not t:
            return None
        return min(1.0, float(s.outlier_excess_s) / float(t))

    @property
    def slow_share(self) -> float | None:
        """The steps' time beyond the median step's pace (steps x median), as a share of the time to train: what
        stalls cost even when they are too many for Tukey's fence (more than a quarter of the steps)."""
        s, t = self.steps, self.row.get("time_to_train_s")
        if s is None or not s.step_time_s or not s.sync_steps or s.sync_median_s is None or not t:
            return None
        return max(0.0, min(1.0, (float(s.step_time_s) - s.sync_steps * float(s.sync_median_s)) / float(t)))

    @property
    def lost_share(self) -> float | None:
        """The larger of the two: time to train lost to outlier steps, or to steps slower than the median."""
        vals = [v for v in (self.stall_share, self.slow_share) if v is not None]
        return max(vals) if vals else None

    def accelerator_hours(self) -> float | None:
        t, n = self.row.get("time_to_train_s"), self.workers
        return None if t is None or n is None else t * n / 3600.0


@dataclass
class Comparison:
    kind: str  # config | scaling | framework | hardware | campaign
    label: str
    runs: list[Run]
    key: dict[str, Any]
    mode: str | None = None  # scaling: strong | weak | mixed

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.label}"

    def by_workers(self) -> dict[int, list[Run]]:
        out: dict[int, list[Run]] = defaultdict(list)
        for r in self.runs:
            if r.workers is not None:
                out[r.workers].append(r)
        return dict(sorted(out.items()))


@dataclass
class View:
    runs: list[Run]
    comparisons: list[Comparison]
    campaigns: dict[str, dict[str, Any]]  # campaign name -> recorded spec (may be empty)

    def campaign_runs(self, campaign: str | None) -> list[Run]:
        return [r for r in self.runs if r.campaign == campaign]

    def of_kind(self, *kinds: str) -> list[Comparison]:
        return [c for c in self.comparisons if c.kind in kinds]


def scaling_mode(runs: Iterable[Run]) -> str:
    """``strong`` if every point has the same global batch, ``weak`` if the same batch per worker, else ``mixed``."""
    points: dict[int, set[int]] = defaultdict(set)
    for r in runs:
        if r.workers and r.global_batch_size:
            points[r.workers].add(int(r.global_batch_size))
    if len(points) < 2 or any(len(b) != 1 for b in points.values()):
        return "mixed"
    batches = {w: next(iter(b)) for w, b in points.items()}
    if len(set(batches.values())) == 1:
        return "strong"
    per_worker = {b / w for w, b in batches.items()}
    return "weak" if len(per_worker) == 1 else "mixed"


def _label(key: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in key.items() if v is not None)


def _group(runs: list[Run], fields: tuple[str, ...]) -> dict[tuple[Any, ...], list[Run]]:
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    for r in runs:
        groups[tuple(r.row.get(f) if f != "workers" else r.workers for f in fields)].append(r)
    return groups


def comparisons(runs: list[Run]) -> list[Comparison]:
    compared = [r for r in runs if (r.purpose or "final") in COMPARED]
    out: list[Comparison] = []
    config = ("campaign", "model", "dataset", "framework", "accelerator", "workers", "global_batch_size")
    for values, group in sorted(_group(compared, config).items(), key=lambda kv: repr(kv[0])):
        key = dict(zip(config, values, strict=True))
        out.append(Comparison("config", _label(key), group, key))
    scaling = ("campaign", "model", "dataset", "framework")
    for values, group in sorted(_group(compared, scaling).items(), key=lambda kv: repr(kv[0])):
        if len({r.workers for r in group if r.workers}) >= 2:
            key = dict(zip(scaling, values, strict=True))
            out.append(Comparison("scaling", _label(key), group, key, scaling_mode(group)))
    framework = ("campaign", "model", "dataset", "workers")
    for values, group in sorted(_group(compared, framework).items(), key=lambda kv: repr(kv[0])):
        if len({r.framework for r in group}) >= 2:
            key = dict(zip(framework, values, strict=True))
            out.append(Comparison("framework", _label(key), group, key))
    for name in sorted({r.campaign for r in compared}, key=lambda c: (c is None, c or "")):
        out.append(Comparison("campaign", name or "(none)", [r for r in runs if r.campaign == name],
                              {"campaign": name}))  # fmt: skip
    hardware = ("campaign", "model", "dataset", "framework")
    for values, group in sorted(_group(compared, hardware).items(), key=lambda kv: repr(kv[0])):
        if len({r.accelerator or r.cpu for r in group}) >= 2:
            key = dict(zip(hardware, values, strict=True))
            out.append(Comparison("hardware", _label(key), group, key))
    return out


def power_samples(
    con: Connection, campaign: str | None = None, run_id: str | None = None
) -> dict[str, list[PowerSample]]:
    """The NVML readings of every run (of one campaign, or one run), by run id."""
    power: dict[str, list[PowerSample]] = defaultdict(list)
    for p in queries.lint_power(con, campaign, run_id).iter_rows(named=True):
        power[p["run_id"]].append(PowerSample(p["rank"], p["device"], p["time"], p["power_w"], p["energy_j"]))
    return power


def build(con: Connection, campaign: str | None = None) -> View:
    """The view of the store (or of one campaign)."""
    evals: dict[str, list[Eval]] = defaultdict(list)
    for e in queries.lint_evals(con, campaign).iter_rows(named=True):
        evals[e["run_id"]].append(
            Eval(
                e["split"], e["metric"], float(e["value"]), float(e["time"]), e["epoch"], e["samples_trained"]
            )
        )
    power = power_samples(con, campaign)
    steps = {s["run_id"]: Steps(**{k: v for k, v in s.items() if k != "run_id"})
             for s in queries.lint_steps(con, campaign).iter_rows(named=True)}  # fmt: skip
    runs = []
    for row in queries.lint_runs(con, campaign).iter_rows(named=True):
        attrs = json.loads(row["attrs"]) if row.get("attrs") else {}
        rid = row["run_id"]
        runs.append(Run(row, tuple(evals.get(rid, ())), steps.get(rid), attrs, tuple(power.get(rid, ()))))
    specs = {}
    for c in queries.campaign_specs(con).iter_rows(named=True):
        specs[c["name"]] = json.loads(c["spec"]) if c["spec"] else {}
    return View(runs, comparisons(runs), specs)


def med(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None
