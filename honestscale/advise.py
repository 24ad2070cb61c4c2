"""The advisor: which setup to use, where the time goes, how far it scales, what to try, with the numbers.

It reads the one view of the store (``honestscale.view``) and the lint result about it, and never recommends from
runs that fail HS101 (accuracy ignored when scaling), HS106 (I/O not considered) or HS110 (trained for the wrong
time): those are listed as excluded. Advice is given per campaign, each named; runs of several campaigns are pooled
into one setup only when the view pools them (``View.pooling``, ``--pool``), and the advice then names the campaigns
pooled. Projections are ``analysis.laws``' fits, the report's: Amdahl's law on the
speedup of a fixed problem, Gustafson's on the scaled speedup of a weak-scaling series, each only where it
describes the measured points, with a 95 % bootstrap interval over the repetitions of each point.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from honestscale.analysis import laws
from honestscale.analysis.points import FindingRecord, Findings, Point, lint_codes, point, verdicts_text
from honestscale.analysis.scaling import TTA, rates, times
from honestscale.analysis.stats import MIN_INTERVAL_RUNS, RATE_STATISTIC, TIME_STATISTIC, differ, ratio
from honestscale.lint import LintResult
from honestscale.view import Run, StepFractions, View, kind_words

BLOCKING = ("HS101", "HS106", "HS110")  # never advise from runs failing these
PARTS = ("data", "compute", "comm", "optimizer")
PART_NAMES = {
    "data": "data loading / I/O",
    "compute": "compute",
    "comm": "communication",
    "optimizer": "optimizer",
}
IMBALANCE = 1.10  # slowest rank's step time over the fastest's, above which ranks are called unbalanced


@dataclass
class Setup:
    campaign: str | None  # POOLED when the view pools campaigns
    model: str
    dataset: str
    framework: str
    workers: int
    runs: int
    succeeded: int
    time_s: float | None
    tta_s: float | None
    samples_per_s: float | None
    per_worker: float | None
    breakdown: dict[str, float | None]
    comm_measured: bool
    imbalance: float | None  # median over runs of slowest rank / fastest rank step time
    dominant: str | None
    dominant_share: float | None
    loader_workers: int | None
    local_batch: int | None
    lr: float | None
    run_ids: list[str] = field(default_factory=list)
    layout: str | None = None  # the parallel layout where it is more than data parallel (``Run.layout_key``)
    comm_dimensions: tuple[str, ...] = ()  # which dimensions' communication t_comm holds (contract 3)
    comm: str = "measured"  # or "not exposed" (the framework hides it), "not recorded" (no step data)
    lint: dict[str, list[str]] = field(default_factory=dict)  # rules failing / unverifiable on these runs


@dataclass
class Projection:
    model: str
    dataset: str
    framework: str
    law: str  # amdahl | gustafson
    parallel_fraction: float
    interval: tuple[float, float] | None  # 95 % bootstrap interval of the parallel fraction
    measured: list[tuple[int, float]]  # (workers, speedup)
    projected: list[laws.Projection]
    points: int = 0  # worker counts behind the fit (2: the p they imply, the law itself untested)
    mode: str = ""  # the series' classification (honestscale.view): strong | weak | mixed
    quantity: str = ""  # what the law is fitted to
    campaign: str | None = None


@dataclass
class CampaignAdvice:
    """The advice about one campaign's runs (or, pooled, about every campaign's)."""

    campaign: str | None  # None: runs without a campaign; POOLED: every campaign of Advice.pooled
    runs: int  # final runs advised from
    setups: list[Setup]
    # per model and dataset (samples of different models are not comparable): the fastest setup
    fastest_per_sample: list[Setup]
    fastest_to_target: list[Setup]
    projections: list[Projection]
    suggestions: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)  # series without a projection, and why
    # "per sample" / "to target", then model / dataset -> the fastest against the next fastest, by the decision rule
    versus_next: dict[str, str] = field(default_factory=dict)


@dataclass
class Advice:
    campaign: str | None  # the campaign asked for (None: the whole store)
    pooled: list[str]  # the campaigns pooled into one setup per configuration; empty: advised per campaign
    excluded: dict[str, list[str]]  # run id -> failing blocking rules
    groups: list[CampaignAdvice]
    statistics: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _excluded(result: LintResult) -> dict[str, list[str]]:
    """Runs failing a blocking rule (unsuppressed), with the codes."""
    out: dict[str, list[str]] = defaultdict(list)
    for f in result.findings:
        if f.code in BLOCKING and f.outcome == "fail" and not f.suppressed:
            for run_id in f.runs:
                if f.code not in out[run_id]:
                    out[run_id].append(f.code)
    return dict(out)


def _hyper(runs: list[Run], key: str) -> Any:
    values = {r.hyperparameters.get(key) for r in runs}
    return values.pop() if len(values) == 1 else None


def _setups(campaign: str | None, runs_of: list[Run], steps: dict[str, StepFractions]) -> list[Setup]:
    groups: dict[tuple[str, str, str, int, str], list[Run]] = defaultdict(list)
    for r in runs_of:  # a layout is a setup of its own: never pooled with another
        groups[
            (str(r.model), str(r.dataset), r.framework or "?", int(r.workers or 0), r.layout_key or "")
        ].append(r)
    out = []
    for (model, dataset, framework, workers, layout), runs in sorted(groups.items()):
        p: Point = point(workers, runs, steps, False)
        ok = [r for r in runs if r.ok and r.id in steps]
        shares = {k: v for k, v in p.breakdown.items() if v is not None}
        dominant = max(shares, key=lambda k: shares[k]) if shares else None
        spreads = [v for r in ok if (v := steps[r.id].get("imbalance")) is not None]
        out.append(
            Setup(
                campaign=campaign,
                model=model,
                dataset=dataset,
                framework=framework,
                workers=workers,
                runs=p.runs,
                succeeded=p.succeeded,
                time_s=p.time_s,
                tta_s=p.tta_s,
                samples_per_s=p.throughput,
                per_worker=p.per_worker,
                breakdown=p.breakdown,
                comm_measured=bool(ok) and all(steps[r.id].get("comm_measured") for r in ok),
                imbalance=median(spreads) if spreads else None,
                dominant=dominant,
                dominant_share=shares.get(dominant) if dominant else None,
                loader_workers=_hyper(runs, "loader_workers"),
                local_batch=next((int(r.local_batch_size) for r in runs if r.local_batch_size), None),
                lr=_hyper(runs, "lr"),
                run_ids=p.run_ids,
                comm=p.comm,
                layout=layout or None,
                comm_dimensions=runs[0].comm_dimensions or (),
            )
        )
    return out


def _projections(view: View, kept_ids: set[str], campaign: str | None) -> tuple[list[Projection], list[str]]:
    """Projections of the campaign's series the data supports (``analysis.laws``, the report's fit), and why the
    others get none."""
    out, withheld = [], []
    for c in view.of_kind("scaling"):
        if c.key.get("campaign") != campaign:
            continue
        name = f"{c.key.get('model')} / {c.key.get('framework')}"
        got = laws.fit(c, kept_ids)
        if got.points < 2:
            continue
        if got.withheld is not None or got.law is None or got.parallel_fraction is None:
            withheld.append(f"{name}: {kind_words(c.mode)} scaling; no projection: {got.withheld}")
            continue
        if not got.fitted:
            withheld.append(
                f"{name}: {kind_words(c.mode)} scaling; {got.law.capitalize()} parallel fraction {got.describe()}"
            )
            continue
        out.append(
            Projection(
                model=str(c.key.get("model")),
                dataset=str(c.key.get("dataset")),
                framework=str(c.key.get("framework")),
                law=got.law,
                parallel_fraction=got.parallel_fraction,
                interval=got.interval,
                measured=got.measured,
                projected=got.projected,
                points=got.points,
                mode=c.mode or "",
                quantity=got.quantity,
                campaign=c.key.get("campaign"),
            )
        )
    return out, withheld


def _suggest(setups: list[Setup], projections: list[Projection]) -> list[str]:
    tips: list[str] = []
    for s in setups:
        if s.dominant is None or s.dominant_share is None:
            continue
        where = f"{s.model} / {s.framework} at {s.workers} worker(s)" + (f" ({s.layout})" if s.layout else "")
        share = f"{100 * s.dominant_share:.0f} %"
        if s.dominant == "data" and s.dominant_share >= 0.25:
            tips.append(
                f"{where} is data/I/O bound ({share} of the step loading data): raise --loader-workers "
                f"(now {s.loader_workers or 0}), stage the data on node-local storage, or preprocess once"
            )
        elif s.dominant == "comm" and s.dominant_share >= 0.25:
            k = 4
            lr = f"{s.lr * k:g}" if s.lr else "k x the current"
            tips.append(
                f"{where} is communication bound ({share} of the step waiting for the gradient exchange): "
                f"a larger per-worker batch (e.g. {k} x {s.local_batch or '?'} with the linear scaling rule, "
                f"lr {lr}, with warm-up), gradient compression (--grad-compression fp16 or powersgd), or fewer "
                f"nodes with more workers per node"
            )
        elif s.dominant == "optimizer" and s.dominant_share >= 0.25:
            tips.append(
                f"{where} spends {share} in the optimizer step: a fused/foreach optimizer or a larger batch"
            )
        if s.imbalance is not None and s.imbalance > IMBALANCE:
            tips.append(
                f"{where}: the slowest rank's step time is {100 * (s.imbalance - 1):.0f} % above the fastest's "
                f"(load imbalance or a straggler): check the host load and other jobs on the node (HS208), "
                f"and uneven data shards"
            )
        if not s.comm_measured and s.workers > 1 and s.layout:
            tips.append(
                f"{where}: the layout's collectives (fully sharded all-gathers and reduce-scatters, tensor-parallel "
                "all-reduces) run inside forward and backward and are counted in compute: a profiler trace "
                "(torch.profiler) shows them"
            )
        elif not s.comm_measured and s.workers > 1:
            tips.append(
                f"{where}: the framework does not expose its all-reduce, so communication is counted in "
                f"compute; run it with Horovod and --horovod-timeline to see it"
            )
    for p in projections:
        low = [r for r in p.projected if r["efficiency"] < 0.5]
        if low:
            r = low[0]
            tips.append(
                f"{p.model} / {p.framework}: {p.law} projects {100 * r['efficiency']:.0f} % efficiency at {r['workers']} "
                f"workers (parallel fraction {p.parallel_fraction:.3f}): do not go that wide for this model; "
                f"use fewer workers or make each worker's share of the work larger"
            )
    return tips


def _advice_of(
    campaign: str | None, runs: list[Run], kept: View, kept_ids: set[str], findings: list[FindingRecord]
) -> CampaignAdvice:
    setups = _setups(campaign, runs, kept.fractions)
    problems: dict[tuple[str, str], list[Setup]] = defaultdict(list)
    for s in setups:
        if s.succeeded:
            problems[(s.model, s.dataset)].append(s)
    per_sample = [
        max(got, key=lambda s: s.samples_per_s or 0.0)
        for got in ([s for s in u if s.samples_per_s] for u in problems.values())
        if got
    ]
    to_target = [
        min(got, key=lambda s: s.tta_s or 0.0)
        for got in ([s for s in u if s.tta_s is not None] for u in problems.values())
        if got
    ]
    for s in setups:
        s.lint = lint_codes(findings, set(s.run_ids))
    projections, withheld = _projections(kept, kept_ids, campaign)
    by_id = {r.id: r for r in runs}

    def throughputs(s: Setup) -> list[float]:
        return rates([by_id[i] for i in s.run_ids if i in by_id], lambda r: r.throughput)

    def ttas(s: Setup) -> list[float]:
        return times([by_id[i] for i in s.run_ids if i in by_id], TTA)

    versus = {}
    for best in per_sample:
        rivals = [s for s in problems[(best.model, best.dataset)] if s is not best and s.samples_per_s]
        versus[f"per sample: {best.model} / {best.dataset}"] = _versus_next(
            best, rivals, throughputs, "hmean"
        )
    for best in to_target:
        rivals = [s for s in problems[(best.model, best.dataset)] if s is not best and s.tta_s is not None]
        versus[f"to target: {best.model} / {best.dataset}"] = _versus_next(best, rivals, ttas, "median")
    return CampaignAdvice(
        campaign,
        len(runs),
        setups,
        per_sample,
        to_target,
        projections,
        _suggest([s for s in setups if s.succeeded], projections),
        withheld,
        versus,
    )


def _versus_next(
    best: Setup, rivals: list[Setup], values: Callable[[Setup], list[float]], statistic: str
) -> str:
    """The fastest setup against the next fastest, by the one decision rule (``analysis.stats.DECISION_RULE``): an
    ordering is stated only where the evidence supports it (SC15 rule 7)."""
    if not rivals:
        return "the only setup that ran it: nothing to be faster than"
    mine = values(best)
    pick = max if statistic == "hmean" else min
    second = pick(
        rivals, key=lambda s: (s.samples_per_s or 0.0) if statistic == "hmean" else (s.tta_s or 0.0)
    )
    theirs = values(second)
    how = ratio(mine, theirs, statistic)
    d = differ(mine, theirs, statistic, how)
    word = "faster" if d.significant else "ahead, not significantly"
    times_ = (
        "" if how is None else f"{how.value:.3g}x the {'throughput' if statistic == 'hmean' else 'time'} of "
    )
    layout = f" ({second.layout})" if second.layout else ""
    return f"{word}: {times_}{second.framework} at {second.workers} worker(s){layout}; {d.describe()}"


def advise(view: View, result: LintResult, campaign: str | None = None) -> Advice:
    """The advice from the view and the lint result about it (``lint(view)``: one set of verdicts), per campaign
    (or pooled, when the view pools campaigns)."""
    excluded = _excluded(result)
    kept = view.keeping([r for r in view.runs if r.id not in excluded])
    findings = Findings(f.as_json() for f in result.findings)
    by_campaign: dict[str | None, list[Run]] = defaultdict(list)
    for r in kept.runs:
        if (r.purpose or "final") in ("final", "baseline", "smoke") and r.workers:
            by_campaign[kept.group_of(r)].append(r)
    kept_ids = {r.id for r in kept.runs}
    groups = [
        _advice_of(name, runs, kept, kept_ids, findings)
        for name, runs in sorted(by_campaign.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    ]
    return Advice(
        campaign, list(view.pooled), excluded, groups, {"time": TIME_STATISTIC, "throughput": RATE_STATISTIC}
    )


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f} %"


def _heading(a: Advice, g: CampaignAdvice) -> str:
    if a.pooled:
        return (
            f"Pooled: {g.runs} run(s) of {len(a.pooled)} campaigns ({', '.join(a.pooled)}), as repetitions of "
            "one setup each (asked with --pool):"
        )
    if g.campaign is None:
        return f"Runs without a campaign ({g.runs} run(s)):"
    return f"Campaign {g.campaign} ({g.runs} run(s)):"


def lines(a: Advice) -> list[str]:
    """The advice as plain sentences, per campaign (the CLI prints them; ``--format json`` gives the numbers)."""
    out: list[str] = []
    if a.excluded:
        out.append(
            f"Excluded {len(a.excluded)} run(s) failing {', '.join(BLOCKING)}: "
            + ", ".join(f"{r} ({', '.join(c)})" for r, c in sorted(a.excluded.items()))
        )
    if not a.groups and a.excluded and all("HS101" in c for c in a.excluded.values()):
        out.append(
            "Nothing to advise from: test accuracy differs across worker counts by more than HS101 allows "
            "(`honestscale lint --select HS101` gives the numbers). Train longer (probe --samples) until "
            "it settles, or check the learning rate and batch at the larger worker count."
        )
        return out
    if not a.groups:
        out.append("No successful final runs to advise from: run a campaign or `honestscale probe` first.")
        return out
    if len(a.groups) > 1:
        out.append(
            f"Advice per campaign ({len(a.groups)} campaigns, each on its own runs); --pool treats the runs of "
            "one setup in every campaign as repetitions of it."
        )
    for g in a.groups:
        out.append(_heading(a, g))
        out += [f"  {line}" for line in _group_lines(g, a.statistics)]
    return out


def _group_lines(g: CampaignAdvice, statistics: dict[str, str]) -> list[str]:
    out: list[str] = []
    for s in g.setups:
        parts = ", ".join(
            f"{PART_NAMES[k]} {_pct(s.breakdown.get(k))}"
            + ("" if k != "comm" or s.comm == "measured" or s.workers == 1 else f" ({s.comm})")
            for k in PARTS
        )
        verdict = (
            f"{PART_NAMES[s.dominant]} bound ({_pct(s.dominant_share)})" if s.dominant else "no step data"
        )
        rate = (
            f"{s.samples_per_s:,.0f} samples/s ({statistics.get('throughput', 'harmonic mean of runs')}, "
            f"{s.succeeded} run(s))"
            if s.samples_per_s
            else "throughput unknown"
        )
        out.append(
            f"{s.model} / {s.framework} at {s.workers} worker(s)"
            + (f" ({s.layout})" if s.layout else "")
            + f": {verdict}; {rate}; step time: {parts}"
            + (f"; rank imbalance {100 * (s.imbalance - 1):.0f} %" if s.imbalance else "")
            + f" [rules: {verdicts_text(s.lint)}]"
        )
    for f in g.fastest_per_sample:
        versus = g.versus_next.get(f"per sample: {f.model} / {f.dataset}", "")
        out.append(
            f"Fastest per sample for {f.model} on {f.dataset}: {f.framework} at {f.workers} worker(s)"
            + (f" ({f.layout})" if f.layout else "")
            + ", "
            f"{f.samples_per_s:,.0f} samples/s ({statistics.get('throughput', 'harmonic mean of runs')}; "
            f"{f.per_worker or 0:,.0f} per worker), {versus} [rules: {verdicts_text(f.lint)}]."
        )
    for f in g.fastest_to_target:
        versus = g.versus_next.get(f"to target: {f.model} / {f.dataset}", "")
        out.append(
            f"Fastest to the target for {f.model} on {f.dataset}: {f.framework} at {f.workers} "
            f"worker(s)"
            + (f" ({f.layout})" if f.layout else "")
            + f", {f.tta_s:.2f} s ({statistics.get('time', 'median of runs')}), {versus} "
            f"[rules: {verdicts_text(f.lint)}]."
        )
    for p in g.projections:
        ci = (
            f" (95 % bootstrap interval {p.interval[0]:.3f}-{p.interval[1]:.3f})"
            if p.interval
            else f" (no interval: needs {MIN_INTERVAL_RUNS}+ repetitions per point)"
        )
        proj = "; ".join(
            f"{r['workers']} workers {_pct(r['efficiency'])}"
            + (f" [{_pct(r['low'])}-{_pct(r['high'])}]" if r["low"] is not None else "")
            for r in p.projected
        )
        measured = ", ".join(f"{w}: {s:.2f}x" for w, s in p.measured)
        out.append(
            f"{p.model} / {p.framework}: {kind_words(p.mode)} scaling; {p.quantity} {measured}; "
            f"{p.law.capitalize()} parallel fraction {p.parallel_fraction:.3f}{ci}; "
            f"projected efficiency {proj}."
        )
    out += list(g.withheld)
    out += [f"Try: {t}." for t in dict.fromkeys(g.suggestions)]
    return out
