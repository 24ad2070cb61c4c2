"""The one read model of the store: typed runs, their evaluations, steps, power samples and ranks, the comparisons
a reader would make and the classification of every scaling series (strong, weak, time to solution, mixed), built once.

Every judge (lint, the statistics, the report, the advisor, the CLI's summary) reads this view and none holds a
connection: one reading of the runs, so that all of them tell one story.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median

from honestscale.view._build import build, concerning, energy_records, listed_runs, listing, power_samples
from honestscale.view._comparisons import (
    COMPARED,
    LIKE,
    LIKE_NAMES,
    PROBLEM,
    Comparison,
    StepFractions,
    View,
    accelerators_by_workers,
    accelerators_text,
    comparisons,
)
from honestscale.view._kinds import (
    KINDS,
    POOLED,
    SPLIT_BY,
    Mode,
    batch_mode,
    classify,
    kind_words,
    label_splits,
    shared_target,
)
from honestscale.view._runs import (
    PARTS,
    EnergyRecord,
    Eval,
    PowerSample,
    Ranks,
    Run,
    Steps,
    StepSeries,
    accelerator_model,
    layout_text,
)


def med(values: Iterable[float | None]) -> float | None:
    """The median of the values that are there (None without any)."""
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


__all__ = [
    "COMPARED",
    "KINDS",
    "LIKE",
    "LIKE_NAMES",
    "PARTS",
    "POOLED",
    "PROBLEM",
    "SPLIT_BY",
    "Comparison",
    "EnergyRecord",
    "Eval",
    "Mode",
    "PowerSample",
    "Ranks",
    "Run",
    "StepFractions",
    "StepSeries",
    "Steps",
    "View",
    "accelerator_model",
    "accelerators_by_workers",
    "accelerators_text",
    "batch_mode",
    "build",
    "classify",
    "comparisons",
    "concerning",
    "energy_records",
    "kind_words",
    "label_splits",
    "layout_text",
    "listed_runs",
    "listing",
    "med",
    "power_samples",
    "shared_target",
]
