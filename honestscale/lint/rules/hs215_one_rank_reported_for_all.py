from __future__ import annotations

from collections.abc import Iterator, Mapping

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View


def imported(run: Run) -> Mapping[str, object]:
    """What an importer said about the log a run came from (empty for honestscale's own events)."""
    return run.imported or {}


def _world_unknown(run: Run) -> bool:
    unknown = imported(run).get("unknown")
    return isinstance(unknown, list) and any(str(u).startswith("world_size") for u in unknown)


def one_rank(partial: list[Run]) -> Said:
    """Runs whose step times and rates come from fewer ranks of the log than they ran on."""
    said = sorted(
        {
            f"{imported(r).get('tool', r.source)}: {imported(r).get('ranks_in_log', 'one rank')}"
            for r in partial
        }
    )
    return (
        f"the step times and rates of {len(partial)} run(s) of "
        f"{', '.join(sorted({str(r.world_size) for r in partial}))} ranks come from "
        f"{', '.join(sorted({str(len(r.ranks.stepped)) for r in partial}))} rank(s) of the log ({'; '.join(said)}): "
        "the other ranks' stragglers and waits are not in them",
        "ingest every rank's log (torchtitan writes one experiment log per rank), or report the numbers as "
        "one rank's, naming it",
    )


RANKS_UNKNOWN: Said = (
    "the log does not say how many ranks the run had, so whether its rates are one rank's is unknown",
    "keep the tool's startup output with the log (Megatron's arguments block, torchtitan's console with "
    "its device mesh), or record the run on every rank with honestscale.record or its callbacks "
    "(Lightning, Transformers' Trainer, Keras: docs/record.md)",
)


class OneRankReportedForAll(Rule):
    """A rate or a time read from one rank must not stand for every rank of a distributed run.

    What it checks: runs read from another tool's log (``honestscale ingest`` of a Megatron-LM log, torchtitan's
    metrics, a DLLogger or Lightning log) say whose numbers the log holds (``imported.ranks_in_log``). A run of
    more than one rank fails when its step times and rates come from fewer ranks than it ran on: Megatron prints
    the last rank's interval times, torchtitan's console and one metrics file one rank's tokens/s, Lightning's
    ``Throughput`` rank 0's rate times the world size. It cannot be verified when the log does not say how many
    ranks ran. A rank counts when its steps are in the store (one that wrote only its start and stop does not);
    a run with no steps at all states no step time or rate. Runs whose every rank's steps are in the store pass
    (their ranks are compared with Kruskal-Wallis in the report's ranks section, as for honestscale's own runs).
    Why it misleads: one rank's time hides the stragglers, the load imbalance and the waiting of the others; a
    rank-0 rate multiplied by the world assumes every rank was as fast as rank 0. A reader takes such a number
    for the run's, and a scaling curve built from it is as good as one rank's view (Hoefler & Belli, SC15, rule
    10: say how parallel times were measured, synchronised and summarised).
    Example: a 64-GPU Megatron run whose "elapsed time per iteration" is the last pipeline stage's, while a slow
    node on the first stage made every iteration wait; torchtitan's "tps" of rank 0 quoted as the job's.
    Fix: keep every rank's data (torchtitan writes one experiment log per rank: ingest them all; record your loop
    with ``honestscale.record`` on every rank), or report the number as one rank's, naming the rank and how its
    time was synchronised.
    Reference: Hoefler & Belli, SC15, rule 10; Hoefler 2018, rule 12 (report how time was measured).
    """

    code = "HS215"
    name = "one-rank-reported-for-all"
    severity = "warning"
    summary = "rates and step times of a distributed run come from every rank, not one rank's log"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        from_logs = [r for r in target.runs if imported(r)]
        unknown = [r for r in from_logs if _world_unknown(r)]
        partial = [
            r
            for r in from_logs
            if r not in unknown
            and r.world_size
            and r.world_size > 1
            and 0 < len(r.ranks.stepped) < r.world_size
        ]
        if partial:
            yield self.fail(
                target,
                partial,
                *one_rank(partial),
                ranks_in_log={r.id: imported(r).get("ranks_in_log") for r in partial},
                world_size={r.id: r.world_size for r in partial},
            )
        if unknown:
            yield self.cannot_verify(
                target,
                unknown,
                *RANKS_UNKNOWN,
            )
