from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View

YEAR_S = 365 * 24 * 3600.0  # a time to train longer than this is a unit or clock error, not a measurement
CLOCK_SLACK_S = 1e-3  # clocks of one rank may step back this much (rounding) without it being a finding


def problems(run: Run) -> dict[str, Any]:
    """What is impossible about one run's data, field by field (empty when nothing is)."""
    out: dict[str, Any] = {}
    t = run.time_to_train_s
    if t is not None and t < 0:
        out["time_to_train_s"] = t
    elif t is not None and t > YEAR_S:
        out["time_to_train_days"] = round(t / 86400, 1)
    ranks = run.ranks
    if ranks.clock_backwards and ranks.clock_backwards_s > CLOCK_SLACK_S:
        out["clock_backwards"] = {
            "events": ranks.clock_backwards,
            "largest_step_back_s": ranks.clock_backwards_s,
        }
    world = run.world_size if run.source == "native" else None
    if world and ranks.seen:
        missing = sorted(set(range(world)) - set(ranks.seen))
        extra = sorted(r for r in ranks.seen if r >= world or r < 0)
        if missing:
            out["missing_ranks"] = missing[:20] + (["..."] if len(missing) > 20 else [])
        if extra:
            out["ranks_beyond_world_size"] = extra[:20]
    if run.parallel and run.world_size:  # a layout whose degrees cannot lay out the ranks it ran on
        d = run.degrees
        product = d["dp"] * d["fsdp"] * d["tp"] * d["pp"] * d["cp"]
        if product != run.world_size:
            out["layout_not_world"] = {
                "parallel": run.parallel,
                "product": product,
                "world_size": run.world_size,
            }
    if ranks.disagree:
        out["ranks_disagree"] = {f: list(v) for f, v in ranks.disagree}
    return out


def impossible(found: dict[str, Any], run: Run) -> Said:
    """Each impossible thing ``problems`` found in one run, in words."""
    parts = []
    if "time_to_train_s" in found:
        parts.append(
            f"run_stop is {-found['time_to_train_s']:,.1f} s before run_start (time to train "
            f"{found['time_to_train_s']:,.1f} s)"
        )
    if "time_to_train_days" in found:
        parts.append(f"a time to train of {found['time_to_train_days']:,} days")
    if "clock_backwards" in found:
        c = found["clock_backwards"]
        parts.append(
            f"the clock went backwards {c['events']} time(s), by up to {c['largest_step_back_s']:.3f} s"
        )
    if "missing_ranks" in found:
        parts.append(
            f"rank(s) {', '.join(map(str, found['missing_ranks']))} of world size {run.world_size} "
            "wrote nothing"
        )
    if "ranks_beyond_world_size" in found:
        parts.append(
            f"rank(s) {', '.join(map(str, found['ranks_beyond_world_size']))} outside world size "
            f"{run.world_size}"
        )
    if "layout_not_world" in found:
        f = found["layout_not_world"]
        parts.append(
            f"its layout {f['parallel']} multiplies to {f['product']} ranks (dp x fsdp x tp x pp x cp), its "
            f"world size is {f['world_size']}: every rate derived from the layout would be wrong"
        )
    if "ranks_disagree" in found:
        parts.append(
            "its ranks disagree on "
            + "; ".join(f"{f} ({' / '.join(v)})" for f, v in found["ranks_disagree"].items())
        )
    return (
        f"{run.id}: " + "; ".join(parts),
        "rerun on nodes with a synchronised, monotonic clock; find and rerun the rank that wrote "
        "nothing; launch every rank with one configuration",
    )


class ImpossibleMeasurements(Rule):
    """Data that cannot be a measurement is a finding, never a silent success.

    What it checks: every run (of every purpose) for what its events make impossible: a time to train that is
    negative (run_stop before run_start) or longer than a year; a clock that went backwards on one rank (an event
    stamped earlier than the one its rank wrote before it, by more than a millisecond); ranks of ``0..world_size-1`` that wrote nothing, or ranks outside it; ranks whose run_start
    disagrees on what defines the run (campaign, framework, model, dataset, world size, nodes, batches,
    precision, parallel layout, config hash); a parallel layout whose degrees do not multiply to the world size
    (dp x fsdp x tp x pp x cp, contract 3). A run whose time to train is negative is no success in any number: it is left out
    of every statistic, and named here.
    Why it misleads: an impossible number printed as a result ("time to train -22.00 s") or a run averaged in
    as if it were whole (a rank that never wrote, two ranks trained with different batches) makes every
    statistic built on it wrong, and nothing else in the output says so (Hoefler & Belli, SC15, rule 9: report
    what was measured, and how).
    Example: an NTP step on one node moves its clock back 30 s mid-run; the run lands as a success with a
    time to train of -22 s, and the median of its configuration drops.
    Fix: rerun on nodes with a monotonic, synchronised clock (honestscale's runners stamp a monotonic clock
    anchored once); find the rank that wrote nothing (its log, its node) and rerun; launch every rank with the
    same configuration.
    Reference: Hoefler & Belli, SC15, rules 9 and 12.
    """

    code = "HS213"
    name = "impossible-measurements"
    severity = "error"
    summary = (
        "no negative or absurd times to train, clocks going backwards, missing, extra or disagreeing ranks"
    )

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("campaign")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        bad = [(r, found) for r in target.runs if (found := problems(r))]
        for run, found in bad:
            yield self.fail(
                target,
                [run],
                *impossible(found, run),
                run=run.id,
                **found,
            )
