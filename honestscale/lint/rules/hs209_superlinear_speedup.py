from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from statistics import median
from typing import Any

from honestscale.analysis.points import DO_NOT_QUOTE
from honestscale.analysis.scaling import Scaled, superlinear
from honestscale.analysis.stats import Estimate
from honestscale.lint._engine import Finding, Rule, Said
from honestscale.lint._fold import apart
from honestscale.view import Comparison, Run, View, accelerators_text

STALLED = 0.10  # a base case losing this share of its time to train to stalls explains a superlinear speedup
CREDIBLE = (
    "a superlinear speedup is credible when the steady-state step throughput is superlinear too, the runs were "
    "repeated on exclusive, quiet nodes (HS208) with the same accelerators, threads per worker, global batch and "
    "precision, and hardware counters show the cause (e.g. fewer cache misses per sample with the smaller "
    "per-worker working set)"
)
# run fields that set how fast one worker is, beside the worker count: (field, how a reader names it)
THREADS = (
    ("intra_op_threads", "intra-op"),
    ("inter_op_threads", "inter-op"),
    ("cpus_allowed", "CPUs allowed"),
)


@dataclass(frozen=True)
class Cause:
    """A likely cause the store shows for a superlinear point.

    ``artefact``: the measurement or a changed setup explains the speedup (stalls, a busier host, other threads,
    accelerators, batch or precision): the number is not a speedup of the system, and must not be quoted.
    ``setup``: a recorded difference of setup (not a measurement): it decides even without an interval.
    Otherwise a plausible real effect (a smaller per-worker working set in caches) that needs its evidence."""

    text: str
    artefact: bool = True
    setup: bool = False


def _load(r: Run) -> float | None:
    """The host's load per CPU as the run started, where it recorded them."""
    return None if (host := r.host_load) is None else host[0] / host[1]


def _med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def _values(runs: list[Run], field: str) -> list[str]:
    got = {r.value(field) for r in runs if r.value(field) is not None}
    return [("framework's choice" if v == 0 else str(v)) for v in sorted(got)]


def thread_difference(base: list[Run], runs: list[Run], point: Scaled) -> Cause | None:
    """Threads per worker (intra-op, inter-op, CPUs allowed) that differ between the base case and the point, as
    ``threads per worker 2 → 1 (intra-op)``; None where they agree or were not recorded on a side."""
    parts = []
    for field, label in THREADS:
        b, n = _values(base, field), _values(runs, field)
        if b and n and b != n:
            parts.append(f"{label} {'/'.join(b)} → {'/'.join(n)}")
    if not parts:
        return None
    knobs = [k for r in base + runs for k in (r.knobs.get("HONESTSCALE_LAUNCHER_SET") or "").split(",") if k]
    how = (
        f"; {', '.join(sorted(set(knobs)))} set by honestscale's launcher, which splits the host's CPUs between the "
        "ranks"
        if knobs
        else ""
    )
    return Cause(
        f"threads per worker {'; '.join(parts)} ({point.base_workers} → {point.workers} workers{how}): each "
        "worker ran on other threads, so the speedup measures the thread change with the workers (on a busy "
        "host, threads that wait for each other slow the worker that has more of them most)",
        setup=True,
    )


def accelerator_difference(base: list[Run], runs: list[Run]) -> Cause | None:
    """The points ran on different accelerator models (``view.accelerators_by_workers``): a hardware change."""
    said = accelerators_text(base + runs)
    if said is None:
        return None
    return Cause(f"different accelerators: {said}: the speedup mixes scale with hardware", setup=True)


def causes(base: list[Run], runs: list[Run], point: Scaled, mode: str | None = None) -> list[Cause]:
    """What the store says about why the scaled runs look more than N times faster: each check below, in turn."""
    found = [
        _stalled_base(base, runs, point),
        _steps_do_not_scale(point),
        _busier_base(base, runs),
        thread_difference(base, runs, point),
        accelerator_difference(base, runs),
        _smaller_working_set(base, runs),
    ]
    # the global batch grows with the workers by design in weak and mixed series: a difference only when strong
    fields = ("global_batch_size", "precision") if mode in (None, "strong") else ("precision",)
    found += [_setup_difference(base, runs, point, field) for field in fields]
    return [c for c in found if c is not None]


def _stalled_base(base: list[Run], runs: list[Run], point: Scaled) -> Cause | None:
    b_stall, n_stall = _med([r.lost_share for r in base if r.ok]), _med([r.lost_share for r in runs if r.ok])
    if b_stall is None or b_stall < STALLED or b_stall <= (n_stall or 0.0):
        return None
    return Cause(
        f"slow or stalled base case: its runs lost a median {100 * b_stall:.0f} % of their time to train to outlier "
        f"steps (HS210), the {point.workers}-worker runs {100 * (n_stall or 0):.0f} %"
    )


def _steps_do_not_scale(point: Scaled) -> Cause | None:
    steady = point.efficiency(point.steady_speedup)
    if steady is None or steady.value > 1.0:
        return None
    return Cause(
        f"the steady-state step throughput gives an efficiency of {steady.value:.2f}: the steps themselves do not "
        "scale superlinearly"
    )


def _busier_base(base: list[Run], runs: list[Run]) -> Cause | None:
    b_load, n_load = _med([_load(r) for r in base]), _med([_load(r) for r in runs])
    if b_load is None or n_load is None or b_load <= n_load * 1.2:
        return None
    return Cause(
        f"the base case ran on a busier host (1-minute load per CPU {b_load:.2f} against {n_load:.2f})"
    )


def _smaller_working_set(base: list[Run], runs: list[Run]) -> Cause | None:
    b_local = {r.local_batch_size for r in base if r.local_batch_size}
    n_local = {r.local_batch_size for r in runs if r.local_batch_size}
    if not b_local or not n_local or max(n_local) >= min(b_local):
        return None
    return Cause(
        f"each worker holds a smaller share of the batch ({max(n_local)} against {min(b_local)} samples): a smaller "
        "working set may fit in caches",
        artefact=False,
    )


def _setup_difference(base: list[Run], runs: list[Run], point: Scaled, field: str) -> Cause | None:
    b_vals = {str(r.value(field)) for r in base if r.value(field) is not None}
    n_vals = {str(r.value(field)) for r in runs if r.value(field) is not None}
    if not b_vals or not n_vals or b_vals == n_vals:
        return None
    return Cause(
        f"different {field.replace('_', ' ')}: {'/'.join(sorted(b_vals))} at the base, "
        f"{'/'.join(sorted(n_vals))} at {point.workers} workers",
        setup=True,
    )


def _fmt(e: Estimate) -> str:
    ci = (
        f" (95 % CI {apart(e.low, 1.0, 2)}-{apart(e.high, 1.0, 2)})"
        if e.low is not None and e.high is not None
        else " (no interval)"
    )
    return f"{apart(e.value, 1.0, 2)}{ci}"


RERUN = (
    f"rerun the base case on an exclusive, quiet node with the other points' threads per worker and "
    f"accelerators, and report steady-state step throughput beside the time; {CREDIBLE}"
)


def superlinear_at(workers: int, above: dict[str, Estimate], found: list[Cause]) -> Said:
    """Efficiency above 1 beyond its interval, with the causes the store names (or that it names none)."""
    said = "; ".join(f"{k} {_fmt(e)}" for k, e in above.items())
    why = (
        ("; likely causes from the store: " + "; ".join(c.text for c in found))
        if found
        else "; the store shows no cause (no stalls; same load, threads, accelerators, batch and precision)"
    )
    return f"superlinear at {workers} workers: {said}{why}", RERUN


def setup_differs(workers: int, unsure: dict[str, Estimate], found: list[Cause]) -> Said:
    """Above 1 with no interval, at points whose setup differs beyond the workers."""
    said = "; ".join(f"{k} {e.value:.2f}" for k, e in unsure.items())
    setup = [c.text for c in found if c.setup]
    others = [c.text for c in found if not c.setup]
    return (
        f"{said} at {workers} workers (no interval: too few runs on a side), and the "
        f"points differ in more than the workers: {'; '.join(setup)}"
        + (f"; also: {'; '.join(others)}" if others else ""),
        RERUN,
    )


def too_few_for_an_interval(workers: int, unsure: dict[str, Estimate], found: list[Cause]) -> Said:
    said = "; ".join(f"{k} {e.value:.2f}" for k, e in unsure.items())
    also = ("; the store shows: " + "; ".join(c.text for c in found)) if found else ""
    return (
        f"{said} at {workers} workers, with too few runs on a side for an interval to tell it from noise{also}",
        "repeat each point (6 runs give a 95 % interval of the median)",
    )


class SuperlinearSpeedup(Rule):
    """A speedup above the ideal (efficiency over 1) needs its cause shown before anyone believes it; one the data
    explains away is not quoted at all.

    What it checks: per scaling series and worker count, the parallel efficiency on time (to accuracy, else to
    train; where the problem is fixed: strong scaling, or every run to one target) and on throughput per worker
    (every mode), each with the 95 % interval of the ratio (bootstrap over the repetitions of both points).
    Efficiency above 1 beyond its interval fails, and the finding names the causes it can check in the store: a
    slow or stalled base case (its runs lost a median 10 % or more of their time to train to outlier steps,
    HS210, and more than the scaled runs lost), a steady-state step throughput that does not scale
    superlinearly, a base case on a busier host, other threads per worker (intra-op or inter-op threads, or CPUs
    allowed, as each runner records them in run_start), other accelerator models at the two points, a different
    precision (or global batch, under strong scaling), and a smaller per-worker working set (caches). Severity:
    **error** when a cause the store names is an artefact of the measurement or the setup (every one of those
    but the working set): the point is marked "do not quote" wherever its number is printed (report headline and
    tables, summary, advise, dashboard) and `lint` exits 1; **warning** when the store names no cause, or only
    the working set, which can make a speedup truly superlinear and needs its hardware counters. Above 1 with no
    interval (too few runs on a side) cannot be verified, unless the points differ in their setup (accelerators,
    threads per worker, precision, a strong series' batch): then no interval is needed to know the number mixes
    scale with that change, and it fails as an error.
    Why it misleads: superlinear speedups are rare and always need an explanation; far more often the base
    case was slow (stalls, a busy node, an unoptimised single-worker path, threads that wait for each other) and
    every speedup built on it is inflated. Printed bare, "2.9x on 2 workers" teaches readers the wrong lesson
    about the system (Hoefler & Belli, SC15, rule 1 on the base case; Hoefler 2018 on comparing with a weak
    baseline). A warning is not enough for a number the store explains away: a warning lets the CI pass and
    the headline print, and the artefact is quoted. Error is not right either for a speedup that may be real
    (caches): it stays a warning, with the evidence to collect.
    Example: on a busy 2-core machine, the launcher gave the 1-worker runs 2 threads and each of 2 workers 1;
    the 1-worker repetitions differed 90x in median step and lost most of their time to stalls, and the report
    headline read "At 2: 7.40x (370 % efficiency), significant difference"; HS209 names the stalls and
    "threads per worker 2 → 1", fails as an error, and every output marks the point "do not quote".
    Fix: look at the causes named; rerun the base case on an exclusive, quiet node with the threads per worker
    of the other points (set OMP_NUM_THREADS yourself, or pin the ranks); compare like accelerators; report the
    steady-state step throughput beside the time; claim a superlinear speedup only with the evidence that
    explains it.
    Reference: Hoefler & Belli, SC15, rules 1 and 9; Ristov et al., "Superlinear speedup in HPC systems:
    why and when?" (FedCSIS 2016).
    """

    code = "HS209"
    name = "superlinear-speedup"
    severity = "error"
    summary = "no efficiency above 1 without its cause; none quoted that the data explains away"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        points = target.by_workers()
        base = points[min(points)] if points else []
        for hot in superlinear(target.mode, points):
            p = hot.point
            runs = base + points[p.workers]
            evidence: dict[str, Any] = {
                "workers": p.workers,
                "base_workers": p.base_workers,
                **{k.replace(" ", "_"): vars(e) for k, e in hot.efficiencies.items()},
            }
            found = causes(base, points[p.workers], p, target.mode)
            artefacts = [c for c in found if c.artefact]
            setup = [c for c in found if c.setup]
            named = {
                "causes": [c.text for c in found],
                "do_not_quote": bool(artefacts if hot.above else setup),
            }
            # each Said unpacked, not starred: mypy cannot match a starred tuple before two ** dicts
            if hot.above:
                message, fix = superlinear_at(p.workers, hot.above, found)
                finding = self.fail(target, runs, message, fix, **named, **evidence)
                if artefacts:
                    yield self._do_not_quote(finding)
                else:
                    finding.severity = "warning"  # no cause, or a plausible real one: it needs its evidence
                    yield finding
            elif setup:
                message, fix = setup_differs(p.workers, hot.unsure, found)
                yield self._do_not_quote(self.fail(target, runs, message, fix, **named, **evidence))
            else:
                missing, record = too_few_for_an_interval(p.workers, hot.unsure, found)
                yield self.cannot_verify(target, runs, missing, record, **named, **evidence)

    @staticmethod
    def _do_not_quote(finding: Finding) -> Finding:
        """An error: the data explains the superlinear number away; every output marks the point so."""
        finding.severity = "error"
        finding.message = f"{DO_NOT_QUOTE}: {finding.message}"
        return finding
