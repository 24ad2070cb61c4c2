"""The one unit of time per comparison, for the tables and the figures alike."""

from __future__ import annotations

UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0))


def unit_for(seconds: list[float | None]) -> tuple[str, float]:
    """One unit for every time of a comparison (tables and figures say the same): s below 2 min, min below
    2 h, else h."""
    top = max((s for s in seconds if s is not None), default=0.0)
    return UNITS[0] if top < 120 else UNITS[1] if top < 7200 else UNITS[2]
