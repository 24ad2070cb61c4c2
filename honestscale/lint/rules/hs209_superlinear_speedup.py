from __future__ import annotations

from collections.abc import Iterator
from statistics import median
from typing import Any

from honestscale.analysis.scaling import Scaled, superlinear
from honestscale.analysis.stats import Estimate
from honestscale.lint._engine import Finding, Rule
from honestscale.view import Comparison, Run, View

STALLED = 0.10  # a base case losing this share of its time to train to stalls explains a superlinear speedup
CREDIBLE = (
    "a superlinear speedup is credible when the steady-state step throughput is superlinear too, the runs were "
    "repeated on exclusive, quiet nodes (HS208) with the same global batch and precision, and hardware counters "
    "show the cause (e.g. fewer cache misses per sample with the smaller per-worker working set)"
)


def _load(r: Run) -> float | None:
    iso = r.attrs.get("isolation") or {}
    load, cpus = iso.get("host_load_1m"), iso.get("cpus")
    if isinstance(load, int | float) and isinstance(cpus, int) and cpus > 0:
        return float(load) / cpus
    return None


def _med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def causes(base: list[Run], runs: list[Run], point: Scaled) -> list[str]:
    """What the store says about why the scaled runs look more than N times faster."""
    found = []
    b_stall, n_stall = (
        _med([r.lost_share for r in base if r.ok]),
        _med([r.lost_share for r in runs if r.ok]),
    )
    if b_stall is not None and b_stall >= STALLED and b_stall > (n_stall or 0.0):
        found.append(f"slow or stalled base case: its runs lost a median {100 * b_stall:.0f} % of their time to "
                     f"train to outlier steps (HS210), the {point.workers}-worker runs {100 * (n_stall or 0):.0f} %")  # fmt: skip
    steady = point.efficiency(point.steady_speedup)
    if steady is not None and steady.value <= 1.0:
        found.append(f"the steady-state step throughput gives an efficiency of {steady.value:.2f}: the steps "
                     f"themselves do not scale superlinearly")  # fmt: skip
    b_load, n_load = _med([_load(r) for r in base]), _med([_load(r) for r in runs])
    if b_load is not None and n_load is not None and b_load > n_load * 1.2:
        found.append(
            f"the base case ran on a busier host (1-minute load per CPU {b_load:.2f} against {n_load:.2f})"
        )
    b_local = {r.local_batch_size for r in base if r.local_batch_size}
    n_local = {r.local_batch_size for r in runs if r.local_batch_size}
    if b_local and n_local and max(n_local) < min(b_local):
        found.append(f"each worker holds a smaller share of the batch ({max(n_local)} against {min(b_local)} "
                     f"samples): a smaller working set may fit in caches")  # fmt: skip
    for field in ("global_batch_size", "precision"):
        b_vals = {str(r.value(field)) for r in base if r.value(field) is not None}
        n_vals = {str(r.value(field)) for r in runs if r.value(field) is not None}
        if b_vals and n_vals and b_vals != n_vals:
            found.append(f"different {field.replace('_', ' ')}: {'/'.join(sorted(b_vals))} at the base, "
                         f"{'/'.join(sorted(n_vals))} at {point.workers} workers")  # fmt: skip
    return found


def _fmt(e: Estimate) -> str:
    ci = f" (95 % CI {e.low:.2f}-{e.high:.2f})" if e.has_interval else " (no interval)"
    return f"{e.value:.2f}{ci}"


class SuperlinearSpeedup(Rule):
    """A speedup above the ideal (efficiency over 1) needs its cause shown before anyone believes it.

    What it checks: per scaling series and worker count, the parallel efficiency on time (to accuracy, else
    to train; where the problem is fixed: strong scaling, or every run trained to one target) and on throughput
    per worker (every mode), each with the 95 % interval of
    the ratio (bootstrap over the repetitions of both points). Efficiency above 1 beyond its interval fails,
    and the finding names the causes it can check in the store: a slow or stalled base case (HS210), a
    steady-state step throughput that does not scale superlinearly, a base case on a busier host, a smaller
    per-worker working set (caches), a different global batch or precision. Above 1 with no interval (one
    run per point) cannot be verified.
    Why it misleads: superlinear speedups are rare and always need an explanation; far more often the base
    case was slow (stalls, a busy node, an unoptimised single-worker path) and every speedup built on it is
    inflated. Printed bare, "2.9x on 2 workers" teaches readers the wrong lesson about the system (Hoefler &
    Belli, SC15, rule 1 on the base case; Hoefler 2018 on comparing with a weak baseline).
    Example: 1-worker runs on a busy 2-core host spent 70 % of their time in stalled steps; the 2-worker runs
    came out "2.90x (145 % efficiency)" although each of their steps was 4x slower.
    Fix: look at the causes named; rerun the base case on an exclusive, quiet node; report the steady-state
    step throughput beside the time; claim a superlinear speedup only with the evidence that explains it.
    Reference: Hoefler & Belli, SC15, rules 1 and 9; Ristov et al., "Superlinear speedup in HPC systems:
    why and when?" (FedCSIS 2016).
    """

    code = "HS209"
    name = "superlinear-speedup"
    severity = "warning"
    summary = "no efficiency above 1 without its cause"

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        points = target.by_workers()
        base = points[min(points)] if points else []
        for hot in superlinear(target.mode, points):
            p = hot.point
            runs = base + points[p.workers]
            evidence: dict[str, Any] = {"workers": p.workers, "base_workers": p.base_workers,
                                        **{k.replace(" ", "_"): vars(e) for k, e in hot.efficiencies.items()}}  # fmt: skip
            if hot.above:
                found = causes(base, points[p.workers], p)
                said = "; ".join(f"{k} {_fmt(e)}" for k, e in hot.above.items())
                why = ("; likely causes from the store: " + "; ".join(found)) if found else \
                    "; the store shows no cause (no stalls, same load, batch and precision)"  # fmt: skip
                yield self.fail(target, runs, f"superlinear at {p.workers} workers: {said}{why}",
                                f"rerun the base case on an exclusive, quiet node and report steady-state step "
                                f"throughput beside the time; {CREDIBLE}", causes=found, **evidence)  # fmt: skip
            else:
                said = "; ".join(f"{k} {e.value:.2f}" for k, e in hot.unsure.items())
                yield self.cannot_verify(target, runs, f"{said} at {p.workers} workers, with one run on a side "
                                         "there is no interval to tell it from noise",
                                         "repeat each point (6 runs give a 95 % interval of the median)", **evidence)  # fmt: skip
