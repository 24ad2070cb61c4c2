"""torchtitan's logs, one module each: the console (every version), the per-rank experiment metrics JSONL and the
per-rank structured system logs of its two layouts.

What a file does not say (the world size in the JSONL files, the model's shape in a console of a version that
does not print it) is recorded as unknown; the JSONL files of one dump folder are one run (its ranks).
"""

from __future__ import annotations

from honestscale.collector.importers.torchtitan.console import FORMAT, LABEL, parse, sniff
from honestscale.collector.importers.torchtitan.experiment import (
    EXPERIMENT,
    EXPERIMENT_LABEL,
    parse_experiment,
    sniff_experiment,
)
from honestscale.collector.importers.torchtitan.system import (
    SYSTEM,
    SYSTEM_LABEL,
    parse_system,
    sniff_system,
)

__all__ = [
    "EXPERIMENT",
    "EXPERIMENT_LABEL",
    "FORMAT",
    "LABEL",
    "SYSTEM",
    "SYSTEM_LABEL",
    "parse",
    "parse_experiment",
    "parse_system",
    "sniff",
    "sniff_experiment",
    "sniff_system",
]
