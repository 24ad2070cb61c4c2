"""One run's record, built once: what ``honestscale show RUN`` prints as text and the dashboard's run page shows as
HTML (and both give as JSON), so that the two never say different things of one run.

The record holds the run's facts (its setup as it landed), its software, final quality (the last evaluation), its
evaluations, where each rank's step time went (warm-up excluded), the steady state its steps reach (MSER-5 on the
first rank), its energy to train (``analysis.energy``: the one place a source is chosen), its events per rank (gaps
are lost events), its profiled steps, the scaling series it is a point of, and the rules' verdicts about it: the
findings of the lint of its campaign that name it (a run of no campaign: the store's other runs of none, as
``honestscale lint`` judges it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from honestscale.analysis import energy, steady
from honestscale.analysis.points import FindingRecord
from honestscale.display import iso
from honestscale.store import Connection, queries
from honestscale.view import concerning, energy_records, med, power_samples

if TYPE_CHECKING:
    from honestscale.judged import Judged

Row = dict[str, object]

FIELDS = (
    "run_id",
    "source",
    "campaign",
    "name",
    "purpose",
    "status",
    "reason",
    "framework",
    "framework_version",
    "launcher",
    "backend",
    "world_size",
    "n_nodes",
    "accelerators_per_node",
    "n_accelerators",
    "accelerator",
    "system",
    "host",
    "cpu",
    "interconnect",
    "intra_op_threads",
    "inter_op_threads",
    "cpus_allowed",
    "launch_env",
    "model",
    "model_params",
    "dataset",
    "train_size",
    "validation_size",
    "test_size",
    "data_source",
    "data_path",
    "global_batch_size",
    "local_batch_size",
    "optimizer",
    "learning_rate",
    "lr_schedule",
    "precision",
    "grad_compression",
    "seed",
    "stop_criterion",
    "stop_value",
    "target_metric",
    "scope",
    "scaling",
    "config_hash",
    "git_commit",
    "slurm_job_id",
    "slurm_step_id",
    "ranks_seen",
    "ranks_stopped",
    "started_at",
    "stopped_at",
    "time_to_train_s",
    "paused_s",
    "source_file",
)


@dataclass(frozen=True)
class Verdicts:
    """The rules' findings that name the run, and what it was judged with."""

    judged_with: str
    findings: list[FindingRecord]

    def as_json(self) -> Row:
        return {"judged_with": self.judged_with, "findings": self.findings}


@dataclass(frozen=True)
class SeriesPoint:
    """A scaling series the run is a point of: its label, kind, worker counts and a label's split."""

    series: str
    kind: str | None
    workers: list[int]
    split: str | None

    def as_json(self) -> Row:
        return {"series": self.series, "kind": self.kind, "workers": self.workers, "split": self.split}


@dataclass(frozen=True)
class RunRecord:
    """One run as ``show`` and the run page give it (``as_json``: ``show --format json``)."""

    facts: Row  # FIELDS, in order; the start and stop as ISO 8601 UTC
    software: dict[str, object] | None
    input_shape: object
    final_accuracy: Row | None  # split, metric, value of the last evaluation
    evals: list[Row]
    step_breakdown: list[Row]  # per rank: steps, samples, t_total and its parts, warm-up excluded
    events_per_rank: list[Row]  # per rank: events by kind, seq range, missing
    steady_state: Row | None  # the first rank's MSER-5 (None without step events)
    profiled_steps: list[Row]
    energy_to_train: Row  # joules and source, or the source "not recorded" and why
    verdicts: Verdicts
    series: list[SeriesPoint]

    @property
    def run_id(self) -> str:
        return str(self.facts["run_id"])

    @property
    def campaign(self) -> str | None:
        got = self.facts.get("campaign")
        return None if got is None else str(got)

    @property
    def rejected(self) -> bool:
        """Whether HS213 rejects the run's time (no measurement): the time is marked wherever it is shown."""
        return any(f["code"] == "HS213" and f["outcome"] == "fail" for f in self.verdicts.findings)

    def as_json(self) -> Row:
        return {
            **self.facts,
            "software": self.software,
            "input_shape": self.input_shape,
            "final_accuracy": self.final_accuracy,
            "evals": self.evals,
            "step_breakdown": self.step_breakdown,
            "events_per_rank": self.events_per_rank,
            "steady_state": self.steady_state,
            "profiled_steps": self.profiled_steps,
            "energy_to_train": self.energy_to_train,
            "verdicts": self.verdicts.as_json(),
            "series": [s.as_json() for s in self.series],
        }


def verdicts(run_id: str, j: Judged) -> Verdicts:
    """The findings of ``j``'s lint that name the run: its campaign's (``j`` is that campaign's judged model), or
    the store's runs of no campaign."""
    found = [f.as_json() for f in j.lint.findings if run_id in (f.runs or [])]
    with_ = f"its campaign {j.campaign}" if j.campaign else "the store's runs of no campaign"
    return Verdicts(with_, found)


def _steady(con: Connection, run_id: str) -> Row | None:
    series = queries.step_series(con, run_id)
    if not len(series):
        return None
    kept = series.filter(pl.col("lead_in") | ~pl.col("warmup"))  # a later launch's start-up: no step's pace
    later = len(series) - len(kept)
    times = kept["t_total"].to_list()
    return steady.of_steps(
        times, int(kept["warmup"].sum()), max(series["iterations"].to_list()), later
    ).as_json()


def _json_field(row: Row, key: str) -> object:
    got = row.get(key)
    return json.loads(str(got)) if got else None


def run_record(con: Connection, run_id: str, j: Judged) -> RunRecord:
    """The record of the run ``run_id`` (a full id: ``queries.resolve_run_id`` finds it from a part), its verdicts
    and series from ``j``: the judged model of its campaign (or of the runs of no campaign) on the same store."""
    run: Row = queries.run(con, run_id).row(0, named=True)
    facts: Row = {k: run.get(k) for k in FIELDS}
    facts["started_at"] = iso(_seconds(run["started_at"]))
    facts["stopped_at"] = iso(_seconds(run["stopped_at"]))
    final = (
        {"split": run["final_split"], "metric": run["final_metric"], "value": run["final_value"]}
        if run["final_value"] is not None
        else None
    )
    records = concerning(run, energy_records(con))
    spent = energy.of_run(run, power_samples(con, run_id=run_id).get(run_id, []), records)
    software = _json_field(run, "software")
    return RunRecord(
        facts=facts,
        software=software if isinstance(software, dict) else None,
        input_shape=_json_field(run, "input_shape"),
        final_accuracy=final,
        evals=queries.evals(con, run_id).to_dicts(),
        step_breakdown=queries.step_breakdown(con, run_id).to_dicts(),
        events_per_rank=queries.event_counts(con, run_id).to_dicts(),
        steady_state=_steady(con, run_id),
        profiled_steps=queries.profile_steps(con, run_id).to_dicts(),
        energy_to_train=spent,
        verdicts=verdicts(run_id, j),
        series=[
            SeriesPoint(c.label, c.mode, list(c.by_workers()), c.split) for c in j.view.series_of(run_id)
        ],
    )


def extremes(rows: Sequence[Mapping[str, object]]) -> tuple[list[Mapping[str, object]], str]:
    """The 3 slowest and the 3 fastest ranks of a step split by samples/s, and the spread said in one line."""

    def rate(s: Mapping[str, object]) -> float:
        total = num(s["t_total"])
        return (num(s["samples"]) or 0) / total if total else 0.0

    ordered = sorted(rows, key=rate)
    rates = [rate(s) for s in ordered]
    middle = med(rates) or 0.0
    spread = f"{100 * (rates[-1] - rates[0]) / middle:.1f} % of the median" if middle else "unknown"
    note = (
        f"{len(rows):,} ranks: the 3 slowest and the 3 fastest by samples/s (slowest {rates[0]:,.1f}, median "
        f"{middle:,.1f}, fastest {rates[-1]:,.1f}; spread {spread})"
    )
    return [*ordered[:3], *ordered[-3:]], note


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def num(v: object) -> float | None:
    """A number of a store row (None where it holds none)."""
    return float(v) if isinstance(v, int | float) else None


def energy_text(spent: Mapping[str, object]) -> str:
    """A run's energy to train as one line: kJ, source, mean power and every rank's share (or why none)."""
    joules = num(spent.get("joules"))
    if joules is None:
        return str(spent["source"]) + (f" ({spent['why']})" if spent.get("why") else "")
    ranks = spent.get("per_rank_joules")
    per_rank = ranks.items() if isinstance(ranks, Mapping) else ()
    power = num(spent.get("mean_power_w"))
    return (
        f"{joules / 1e3:,.2f} kJ ({spent['source']}"
        + (f"; mean power {power:,.0f} W" if power else "")
        + (
            f"; per rank: {', '.join(f'{r}: {(num(j) or 0) / 1e3:,.2f} kJ' for r, j in per_rank)}"
            if per_rank
            else ""
        )
        + ")"
    )


def step_shares(s: Mapping[str, object]) -> tuple[str, ...]:
    """One rank's step split as the table shows it: optimizer steps (and the logging intervals they were logged in,
    where a log timed intervals, not steps), samples, samples/s, and the share of the step time in data, compute,
    communication, optimizer and other ("not measured" where a part was not)."""
    total = num(s["t_total"]) or 0.0

    def pct(v: object) -> str:
        got = num(v)
        return "not measured" if got is None else "-" if not total else f"{100 * got / total:.1f}%"

    known = sum(num(s[k]) or 0.0 for k in ("t_data", "t_compute", "t_comm", "t_optimizer"))
    samples = num(s["samples"])  # a log that counts no samples (tokens only): unknown, never 0
    return (
        str(s["rank"]),
        f"{s['steps']:,}"
        if s.get("intervals") in (None, s["steps"])
        else f"{s['steps']:,} in {s['intervals']:,} intervals",
        str(s["samples"]) if samples is not None else "not counted",
        f"{samples / total:.1f}" if total and samples is not None else "-",
        pct(s["t_data"]),
        pct(s["t_compute"]),
        pct(s["t_comm"]) if s["comm_measured"] else "not measured",
        pct(s["t_optimizer"]),
        pct(max(total - known, 0.0)),
    )


STEP_COLUMNS = ("rank", "steps", "samples", "samples/s", "data", "compute", "comm", "optimizer", "other")


def steady_text(ss: Mapping[str, object]) -> str:
    """The steady state of the first rank's steps in one line (MSER-5's warm-up, the mean step after it and its
    batch-means interval), or why none was found."""
    what = "logging intervals" if num(ss.get("steps_per_event")) not in (None, 1) else "steps"
    marked = f"the run marks {ss['marked_warmup_steps']} warm-up {what[:-1]}(s)"
    if later := ss.get("later_warmup_left_out"):
        marked += f" at its start and {later} at a later launch's (left out)"
    if ss["detected_warmup_steps"] is None:
        return f"steady state (first rank's {ss['steps']} {what}): {ss['verdict']}; {marked}"
    low, high = num(ss["low_s"]), num(ss["high_s"])
    interval = (
        f" [{low:.4g}, {high:.4g}] (95 %, {ss['batches']} batch means)"
        if low is not None and high is not None
        else " (too few steps for an interval)"
    )
    return (
        f"steady state (first rank's {ss['steps']} steps, MSER-5): warm-up ends after step "
        f"{ss['detected_warmup_steps']}, {marked}; mean step after it {num(ss['steady_step_s']):.4g} s{interval}"
    )


__all__ = [
    "FIELDS",
    "STEP_COLUMNS",
    "RunRecord",
    "SeriesPoint",
    "Verdicts",
    "energy_text",
    "extremes",
    "num",
    "run_record",
    "steady_text",
    "step_shares",
    "verdicts",
]
