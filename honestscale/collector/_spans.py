"""Time spans (start, end) of trace events: merged, clipped, measured (Horovod timelines, profiler traces)."""

from __future__ import annotations

from bisect import bisect_left


def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The spans merged where they overlap or touch, in order."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(spans: list[tuple[float, float]]) -> float:
    """The time the (disjoint) spans cover."""
    return sum(b - a for a, b in spans)


def clip(spans: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of the spans inside ``[lo, hi]``."""
    return [(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi]


def intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """The time two sorted lists of disjoint spans share."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(hi - lo, 0.0)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


class Sorted:
    """Named spans sorted by start, so those that overlap a window are found without a scan of them all (a trace
    of many steps is read in time linear in its events, not steps x events)."""

    def __init__(self, spans: list[tuple[float, float, str]]) -> None:
        self.spans = sorted(spans)
        self.starts = [a for a, _, _ in self.spans]
        self.longest = max((b - a for a, b, _ in self.spans), default=0.0)

    def overlapping(self, lo: float, hi: float) -> list[tuple[float, float, str]]:
        """The spans that overlap ``(lo, hi)``: a span that starts before ``lo - longest`` ends before ``lo``."""
        i, j = bisect_left(self.starts, lo - self.longest), bisect_left(self.starts, hi)
        return [s for s in self.spans[i:j] if s[1] > lo]
