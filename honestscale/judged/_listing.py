"""What ``honestscale runs`` lists, built here and not in the CLI: every run of a selection (superseded ones
included) with its time to accuracy and the target it refers to, its layout and rates (with the statistic they
are) and MFU where its FLOPs can be counted, its energy to train, and the times HS213 rejects (no measurement:
never printed as one)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from honestscale.analysis import energy, flops
from honestscale.analysis.scaling import targets_of, time_to_accuracy
from honestscale.lint import Finding, lint
from honestscale.store import Connection, queries
from honestscale.view import Run, concerning, energy_records, listing, power_samples

if TYPE_CHECKING:
    import polars as pl


class Target(TypedDict):
    split: str
    metric: str
    better: str
    value: float


class Reached(TypedDict):
    """A run's time to accuracy (None where it has no target or did not reach it) and the targets it refers to."""

    time_to_accuracy_s: float | None
    target: list[Target] | None


UNREACHED: Reached = {"time_to_accuracy_s": None, "target": None}  # a run with no targets, or none asked


def reached(runs: list[Run]) -> dict[str, Reached]:
    """Per run id: its time to accuracy (None where it has no target or did not reach it) and the targets it
    refers to (validation split, each metric with its direction and value)."""
    out: dict[str, Reached] = {}
    for r in runs:
        goals = targets_of(r)
        out[r.id] = {
            "time_to_accuracy_s": time_to_accuracy(r) if goals else None,
            "target": [
                {"split": "validation", "metric": g.name, "better": g.better, "value": g.target}
                for g in goals
            ]
            or None,
        }
    return out


def rejected_times(findings: Iterable[Finding]) -> dict[str, dict[str, object]]:
    """Per run id, the rule that rejects its measurements (HS213: a time to train that is negative or longer than a
    year, a clock gone backwards, ranks missing, extra or disagreeing): its times are no measurement and are never
    printed as one (``runs``: marked in the table, withheld in JSON and CSV with the rule and why)."""
    out: dict[str, dict[str, object]] = {}
    for f in findings:
        if f.code == "HS213" and f.outcome == "fail":
            for rid in f.runs:
                reason = f.message.removeprefix(f"{rid}: ")
                out[rid] = {"rule": f.code, "severity": f.severity, "reason": reason}
    return out


RATES_ARE = (
    "per run, over its synchronous steps (the slowest rank's time per step), warm-up excluded; each data-parallel "
    "replica's samples and tokens counted once (the ranks of a tensor, pipeline or context-parallel group process "
    "the same ones); per worker: the total over the accelerators in use (the processes of a CPU run)"
)


def layouts(runs: list[Run]) -> dict[str, dict[str, object]]:
    """Per run id: its parallel layout, its rates (``RATES_ARE`` says which statistic they are) and, where its
    FLOPs can be counted (a transformer's shape, or the FLOPs per token it recorded), its MFU and HFU recomputed
    from the counts (``utilisation``: every number it is made of, the peak and its source; null MFU where the
    accelerator has no peak)."""
    out: dict[str, dict[str, object]] = {}
    for r in runs:
        # a log of fewer ranks than the run had (HS215): its rates are those ranks', never divided by the world
        partial = bool(
            r.imported is not None
            and r.world_size
            and r.ranks_seen is not None
            and r.ranks_seen < r.world_size
        )
        per = r.throughput / r.workers if r.throughput is not None and r.workers and not partial else None
        u = flops.utilisation(r) if flops.audited(r) else None
        are = (
            f"{RATES_ARE}; from the steps of {r.ranks_seen} of the run's {r.world_size} ranks (the log holds no "
            "more): those ranks' rates, not the run's (HS215), and no per-worker rate"
            if partial
            else RATES_ARE
        )
        out[r.id] = {
            "layout": r.layout,
            "parallel": r.degrees if r.parallel else None,
            "samples_per_s": r.throughput,
            "samples_per_s_per_worker": per,
            "tokens_per_s": r.tokens_per_s,
            "tokens_per_s_per_worker": None if partial else r.tokens_per_s_per_accelerator,
            "rates_are": are if r.throughput is not None else None,
            "utilisation": None
            if u is None
            else u.as_json()
            | {
                "method": flops.MFU_METHOD,
                "no_peak": u.peak.missing or None,
                "to_record": u.peak.record or None,
            },
        }
    return out


def energies(con: Connection, campaign: str | None) -> dict[str, dict[str, object]]:
    """Each run's energy to train as ``show`` and the report give it (``analysis.energy``: one place chooses)."""
    power, records = power_samples(con, campaign), energy_records(con)
    rows = queries.lint_runs(con, campaign, with_superseded=True).iter_rows(named=True)
    return {r["run_id"]: energy.of_run(r, power.get(r["run_id"], []), concerning(r, records)) for r in rows}


@dataclass
class Listing:
    """The runs of a selection as ``runs`` lists them; the details (``details=True``) for JSON and CSV."""

    frame: pl.DataFrame  # one row per run, as the store lists it
    runs: list[Run]
    rejected: dict[str, dict[str, object]]  # HS213's rejections, per run id
    reached: dict[str, Reached] = field(default_factory=dict)
    layouts: dict[str, dict[str, object]] = field(default_factory=dict)
    energies: dict[str, dict[str, object]] = field(default_factory=dict)


def listed(con: Connection, campaign: str | None = None, *, details: bool = False) -> Listing:
    """The runs of ``campaign`` (every run where None) on a connection the caller holds: HS213 judged on the runs
    not superseded (the rules about single runs; no power read, no whole view built)."""
    queries.check_campaign(con, campaign)
    frame = queries.runs(con, campaign)
    runs, view = listing(con, campaign)
    rejected = rejected_times(lint(view, select=["HS213"]).findings)
    if not details:
        return Listing(frame, runs, rejected)
    return Listing(frame, runs, rejected, reached(runs), layouts(runs), energies(con, campaign))
