"""Events of one rank of an imported run, built in the order of the log and numbered as the contract asks."""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from honestscale import events as ev


def number(value: Any) -> float | None:
    """A finite number of a log (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def count(value: Any, least: int = 0) -> int | None:
    """An integer of a log usable as a count (an integral float too), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and least <= value <= ev.INT_MAX:
        return value
    return None


def stamp(text: str, *formats: str) -> float | None:
    """Epoch seconds of a log's timestamp, read as UTC (the logs print local time without a zone: only differences
    are used); None when it is no date in any of ``formats`` (2026-02-30)."""
    for fmt in formats:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


_RAISED = re.compile(
    r"^(?:\[\w+\]:)?\s*(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt)): ?(.*)$", re.MULTILINE
)


def crash(text: str, after: int = 0) -> str | None:
    """The exception a log ends with: a Python traceback (``Traceback (most recent call last)``) after the log's
    last progress line (its line number ``after``: one the run went on past is not its end), its last ``SomeError:
    message`` line; None when there is none."""
    start = 0
    for _ in range(after):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    at = text.rfind("Traceback (most recent call last)", start)
    if at < 0:
        return None
    raised = list(_RAISED.finditer(text, at))
    return f"{raised[-1].group(1)}: {raised[-1].group(2)}".strip()[:300] if raised else "a Python traceback"


def run_id(tool: str, identity: str) -> str:
    """``<tool>:<hash>`` of what identifies the run in its own log (the same copy anywhere is the same run, so a
    copy is a duplicate and a different run with the same identity a conflict)."""
    return f"{tool}:{hashlib.sha1(identity.encode(), usedforsecurity=False).hexdigest()[:16]}"


def config_hash(what: dict[str, Any]) -> str:
    """A hash over what the log says defines the experiment (its seed left out by the caller): runs whose logs
    say the same get the same hash; what a log does not print cannot tell runs apart (HS108 then sees them alike)."""
    text = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def folder_name(path: Path) -> str:
    return path.parent.name or path.stem


class RankEvents:
    """The events one rank of an imported run contributes, each with the log line it came from."""

    def __init__(self, run_id: str, rank: int) -> None:
        self.run_id = run_id
        self.rank = rank
        self._events: list[tuple[int, dict[str, Any]]] = []

    def add(self, line: int, kind: str, time: float, **fields: Any) -> dict[str, Any]:
        event: dict[str, Any] = {
            "schema": ev.SCHEMA_VERSION,
            "run_id": self.run_id,
            "rank": self.rank,
            "seq": 0,
            "time": time,
            "kind": kind,
        }
        event.update({k: v for k, v in ev.finite_json(fields).items() if v is not None})
        self._events.append((line, event))
        return event

    def __len__(self) -> int:
        return len(self._events)

    def numbered(self) -> list[tuple[int, dict[str, Any]]]:
        """The events in the order added, seq 0, 1, 2, ..."""
        for i, (_, event) in enumerate(self._events):
            event["seq"] = i
        return list(self._events)
