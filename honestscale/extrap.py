"""Extra-P's JSON Lines input (``extrap --json FILE``): every run's value of every measure of every scaling series,
one line each, ``{"params": {"p": workers}, "callpath": series, "metric": measure, "value": value}``, so a
reader can model the same series with Extra-P (docs/predict.md)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

# the series' name, the measure, worker count -> each run's value
Series = tuple[str, str, dict[int, list[float]]]


def lines(series: Iterable[Series]) -> Iterator[str]:
    """One JSON line per run and measure, the series as Extra-P's call path and the measure as its metric."""
    for name, measure, samples in series:
        for workers, values in sorted(samples.items()):
            for value in values:
                yield json.dumps(
                    {"params": {"p": workers}, "callpath": name, "metric": measure, "value": value}
                )
