"""Repetitions until the interval is narrow (SC15 rule 5, §4.2.2): how precise each configuration's time is.

A configuration is measured precisely enough when the 95 % order-statistic interval of its median time (time
to accuracy where every successful run reached its target, else time to train) lies within a given fraction
of the median on both sides. ``campaign run --until-ci`` adds repetitions until it does, up to a cap; the
report says how many runs each configuration needed and whether the cap stopped it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the spec reader imports this module for parse_fraction: it stays free of scipy and DuckDB
    from honestscale.view import Run

MAX_REPETITIONS = 20  # the cap of until_ci when a spec gives none


@dataclass(frozen=True)
class Precision:
    runs: int  # every run of the configuration, failed ones included (they count toward the cap)
    timed: int  # successful runs with a time
    measure: str  # time to accuracy | time to train
    median_s: float | None
    reach: float | None  # the interval's larger side over the median; None while there are too few runs
    fraction: float
    cap: int
    met: bool  # the interval lies within the fraction (stats.interval_within)

    @property
    def capped(self) -> bool:
        """The cap stopped it: the interval is still wider than asked."""
        return not self.met and self.runs >= self.cap

    def describe(self) -> str:
        """'8 runs: interval within ±4.1 % of the median (asked ±5 %)', or why it stopped without."""
        if self.reach is None:
            width = "no 95 % interval yet (6 successful runs are the fewest)"
        else:
            width = f"interval {'within' if self.met else 'reaches'} ±{100 * self.reach:.1f} % of the median"
        if self.met:
            return f"{self.runs} runs: {width} (asked ±{100 * self.fraction:g} %)"
        if self.capped:
            return f"{self.runs} runs, stopped by the cap of {self.cap}: {width}, wider than the ±{100 * self.fraction:g} % asked"
        return f"{self.runs} runs so far: {width}, wider than the ±{100 * self.fraction:g} % asked"


def parse_fraction(value: object) -> float | None:
    """``"5%"`` or ``0.05`` as 0.05; None for anything that is not a fraction strictly between 0 and 1."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    try:
        got = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return None
    return got if 0 < got < 1 else None


def of_spec(spec: dict[str, Any]) -> tuple[float, int] | None:
    """The (fraction, cap) a recorded campaign spec asked for with until_ci, or None."""
    camp = spec.get("campaign") or {}
    got = parse_fraction(camp.get("until_ci")) if camp.get("until_ci") is not None else None
    if got is None:
        return None
    cap = camp.get("max_repetitions", MAX_REPETITIONS)
    return got, int(cap) if isinstance(cap, int) else MAX_REPETITIONS


def precision(runs: Sequence[Run], fraction: float, cap: int) -> Precision:
    """How precise the median time of these runs (one configuration's repetitions) is against ``fraction``."""
    from honestscale.analysis.scaling import time_metric, times
    from honestscale.analysis.stats import centre_of_times, interval_within

    metric = time_metric({0: list(runs)})
    ts = times(runs, metric)
    met, reach = interval_within(ts, fraction)
    return Precision(len(runs), len(ts), metric, centre_of_times(ts), reach, fraction, cap, met)
