"""Per-run reasons folded into one statement: a finding about many runs says each reason once, with how many runs
give it and the range of its numbers ("6 of 6 runs: steps waited for a CPU 84–99 % of their time; host load
3.5–3.9 on 2 CPUs"), never one sentence per run. Written once, for every rule and presenter that states reasons
about several runs (the runs themselves are the finding's; the per-run values stay in its evidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    """One run's reason: a text with ``{}`` where each of its numbers goes, and the numbers."""

    text: str
    values: tuple[float, ...] = ()


def number(x: float) -> str:
    """A number with the digits that carry meaning: 3 significant figures, whole thousands grouped."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def apart(x: float, bound: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals, or as many more (up to 4) as tell it from the ``bound`` a rule judges it
    against: 1.0003 against 1 reads "1.0003", not "1.00"; 0.0499 against 0.05 "0.0499", not "0.050"."""
    for d in range(decimals, decimals + 5):
        if x == bound or f"{x:.{d}f}" != f"{bound:.{d}f}":
            return f"{x:.{d}f}"
    return f"{x:.{decimals + 4}f}"


def span(values: Sequence[float]) -> str:
    """The range of ``values`` ("84–99"), or the one value where all read alike at 3 figures."""
    low, high = number(min(values)), number(max(values))
    return low if low == high else f"{low}–{high}"


def fold(reasons: Mapping[str, Iterable[Reason]], of: int | None = None) -> str:
    """``reasons`` (per run id, in order) as one statement: each text once, its numbers as ranges over the runs
    that give it, the texts given by the same runs under one count ("2 of 6 runs: ..."; ``of``: the runs judged,
    the runs named where None)."""
    by_text: dict[str, list[tuple[str, tuple[float, ...]]]] = {}
    for run, given in reasons.items():
        for r in given:
            by_text.setdefault(r.text, []).append((run, r.values))
    total = len(reasons) if of is None else of
    groups: dict[frozenset[str], list[str]] = {}
    for text, got in by_text.items():
        width = min(len(values) for _, values in got)
        said = text.format(*(span([values[i] for _, values in got]) for i in range(width)))
        groups.setdefault(frozenset(run for run, _ in got), []).append(said)
    parts = []
    for runs, texts in groups.items():
        who = "the run" if total == 1 else f"{len(runs)} of {total} runs"
        parts.append(f"{who}: {'; '.join(texts)}")
    return "; ".join(parts)


__all__ = ["Reason", "fold", "number", "span"]
