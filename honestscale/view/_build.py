"""The view, built once from the store's typed queries: no judge holds a connection."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping

from honestscale.store import Connection, queries
from honestscale.view._comparisons import StepFractions, View, comparisons
from honestscale.view._runs import EnergyRecord, Eval, PowerSample, Ranks, Run, Steps, StepSeries


def power_samples(
    con: Connection, campaign: str | None = None, run_id: str | None = None
) -> dict[str, list[PowerSample]]:
    """The NVML readings of every run (of one campaign, or one run), by run id."""
    power: dict[str, list[PowerSample]] = defaultdict(list)
    for p in queries.lint_power(con, campaign, run_id).iter_rows(named=True):
        power[p["run_id"]].append(PowerSample(p["rank"], p["device"], p["time"], p["power_w"], p["energy_j"]))
    return power


def energy_records(con: Connection) -> list[EnergyRecord]:
    """Every energy record of the store (CodeCarbon rows, Slurm accounting lines)."""
    return [EnergyRecord(**r) for r in queries.energy_records(con).iter_rows(named=True)]


def concerning(row: Mapping[str, object], records: list[EnergyRecord]) -> tuple[EnergyRecord, ...]:
    """The records that may concern a run: its Slurm job's lines; a record of no job whose window overlaps the
    run's (analysis/energy.py decides which, if any, is the run's energy, and says why)."""
    job = row.get("slurm_job_id")
    start, stop = (
        t if isinstance(t, int | float) else None for t in (row.get("started_at"), row.get("stopped_at"))
    )
    out = []
    for r in records:
        if r.job_id is not None:
            if job and r.job_id == job:
                out.append(r)
        elif start is not None and r.started_at is not None and r.stopped_at is not None:
            end = stop if stop is not None else start
            if r.started_at <= end and r.stopped_at >= start:
                out.append(r)
    return tuple(out)


def _ranks(con: Connection, campaign: str | None) -> dict[str, Ranks]:
    out = {}
    for r in queries.lint_ranks(con, campaign).iter_rows(named=True):
        disagree = tuple((d["field"], tuple(d["vals"])) for d in r["disagree"] or ())
        out[r["run_id"]] = Ranks(tuple(r["seen"] or ()), int(r["clock_backwards"]), float(r["clock_backwards_s"]),
                                 disagree, tuple(r["stepped"] or ()))  # fmt: skip
    return out


def _evals(con: Connection, campaign: str | None) -> dict[str, list[Eval]]:
    evals: dict[str, list[Eval]] = defaultdict(list)
    for e in queries.lint_evals(con, campaign).iter_rows(named=True):
        evals[e["run_id"]].append(
            Eval(
                e["split"], e["metric"], float(e["value"]), float(e["time"]), e["epoch"], e["samples_trained"]
            )
        )
    return evals


def listed_runs(con: Connection, campaign: str | None = None) -> list[Run]:
    """Every run (of one campaign) with its evaluations and ranks, superseded ones included: what a listing of the
    runs needs (``runs --format json``: time to accuracy, rates; the per-run rules: HS213), without power."""
    evals = _evals(con, campaign)
    ranks = _ranks(con, campaign)
    steps = _steps(con, campaign)
    return [Run.from_row(row, evals=tuple(evals.get(row["run_id"], ())), ranks=ranks.get(row["run_id"], Ranks()),
                         steps=steps.get(row["run_id"]))
            for row in queries.lint_runs(con, campaign, with_superseded=True).iter_rows(named=True)]  # fmt: skip


def _steps(con: Connection, campaign: str | None) -> dict[str, Steps]:
    return {s["run_id"]: Steps(**{k: v for k, v in s.items() if k != "run_id"})
            for s in queries.lint_steps(con, campaign).iter_rows(named=True)}  # fmt: skip


def listing(con: Connection, campaign: str | None = None) -> tuple[list[Run], View]:
    """The listed runs (``listed_runs``) and the view of those not superseded, for the rules about single runs
    (HS213), without reading power: a listing of the runs need not build the whole store's view."""
    runs = listed_runs(con, campaign)
    superseded = queries.superseded(con, campaign)
    kept = [r for r in runs if r.id not in superseded]
    return runs, View(kept, comparisons(kept), {}, superseded=superseded)


def build(con: Connection, campaign: str | None = None) -> View:
    """The view of the store (or of one campaign)."""
    evals = _evals(con, campaign)
    power = power_samples(con, campaign)
    steps = _steps(con, campaign)
    ranks = _ranks(con, campaign)
    records = energy_records(con)
    series = {r["run_id"]: StepSeries(tuple(float(t) for t in r["times"]), int(r["marked"]), int(r["iterations"]),
                                      tuple(None if p is None else float(p) for p in r["pressure"]))
              for r in queries.lint_step_series(con, campaign).iter_rows(named=True)}  # fmt: skip
    runs = []
    for row in queries.lint_runs(con, campaign).iter_rows(named=True):
        rid = row["run_id"]
        runs.append(Run.from_row(row, evals=tuple(evals.get(rid, ())), steps=steps.get(rid),
                                 power=tuple(power.get(rid, ())), ranks=ranks.get(rid, Ranks()),
                                 energy_records=concerning(row, records), series=series.get(rid)))  # fmt: skip
    specs = {}
    for c in queries.campaign_specs(con).iter_rows(named=True):
        specs[c["name"]] = json.loads(c["spec"]) if c["spec"] else {}
    fractions = {r["run_id"]: StepFractions(data=r["data"], compute=r["compute"], comm=r["comm"],
                                            optimizer=r["optimizer"], samples_per_s=r["samples_per_s"],
                                            tokens_per_s=r["tokens_per_s"], comm_measured=r["comm_measured"],
                                            imbalance=r["imbalance"])
                 for r in queries.run_step_fractions(con, campaign).iter_rows(named=True)}  # fmt: skip
    rank_times: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for r in queries.rank_step_times(con, campaign).iter_rows(named=True):
        rank_times[r["run_id"]][int(r["rank"])] = [float(t) for t in r["times"] if t is not None]
    return View(
        runs, comparisons(runs), specs, fractions, dict(rank_times), queries.superseded(con, campaign)
    )
