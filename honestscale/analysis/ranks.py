"""Ranks summarised soundly (SC15 rule 10): whether a run's ranks step at different paces, and its straggler.

A synchronous data-parallel step waits for its slowest rank, so every step time honestscale reports is the
**maximum over ranks** of that step (never the mean, which would hide a straggler). Per run with more than
one rank, the Kruskal-Wallis H test says whether the ranks' step times (warm-up excluded) come from one
distribution; the slowest rank is the one with the largest median step, and its excess is that median over
the median of the ranks' medians, minus one. A run whose slowest rank is more than ``STRAGGLER`` slower, and
significantly so, has a straggler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from honestscale.analysis.stats import RankSpread, centre_of_times, rank_spread

SUMMARY = "the maximum over ranks of each step (a synchronous step waits for its slowest rank)"
TEST = "Kruskal-Wallis H test over each rank's step times (warm-up excluded), 5 %"
STRAGGLER = 0.10


@dataclass(frozen=True)
class RunRanks:
    run_id: str
    spread: RankSpread

    @property
    def straggler(self) -> bool:
        s = self.spread
        return s.differ and s.excess is not None and s.excess > STRAGGLER


def of_runs(rank_times: dict[str, dict[int, list[float]]]) -> dict[str, RunRanks]:
    """Every run with step events (``View.rank_times``): the test over its ranks and its slowest rank."""
    return {rid: RunRanks(rid, rank_spread(ranks)) for rid, ranks in rank_times.items()}


def summarise(run_ids: list[str], spreads: dict[str, RunRanks]) -> dict[str, Any]:
    """For the report: how ranks were summarised, in how many of these runs they differ, and the stragglers."""
    multi = [spreads[r] for r in run_ids if r in spreads and spreads[r].spread.ranks > 1]
    excess = [m.spread.excess for m in multi if m.spread.excess is not None]
    return {
        "summary": SUMMARY, "test": TEST, "runs": len(multi), "differ": sum(m.spread.differ for m in multi),
        "median_excess": centre_of_times(excess),
        "stragglers": [{"run_id": m.run_id, "rank": m.spread.slowest_rank, "excess": m.spread.excess,
                        "p_value": m.spread.p_value} for m in multi if m.straggler],
    }  # fmt: skip
