"""Events of one rank of an imported run, built in the order of the log and numbered as the contract asks."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from honestscale import events as ev
from honestscale.collector._parsed import BadLine, Parsed


def number(value: Any) -> float | None:
    """A finite number of a log (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _as_float(value: Any) -> float | None:
    """A log's value as a float, finite or not (a number, or a number written as text); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def checked(
    out: Parsed,
    line: int,
    raw: str,
    field: str,
    value: Any,
    *,
    least: float | None = None,
    most: float | None = None,
    above: float | None = None,
    what: str = "value",
) -> float | None:
    """A number of a log that is finite and can be what its field says, else None.

    A field that is absent or empty is just None. A field that holds a value it cannot hold (NaN, +-inf, a word
    where a number belongs, a negative time or energy, an accuracy outside [0, 1]) is never dropped in silence:
    it goes to the quarantine with the line, the field and why (``least``/``most``: the bounds it may reach;
    ``above``: the bound it must pass, ``above=0`` for a duration), and the caller leaves it out.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    got = _as_float(value)
    if got is None or not math.isfinite(got):
        shown = value if got is None else got
        out.bad.append(
            BadLine(line, raw, f"field {field!r}: {shown!r} is no finite number: the {what} is left out")
        )
        return None
    why = (
        f"below {least:g}"
        if least is not None and got < least
        else f"above {most:g}"
        if most is not None and got > most
        else f"not above {above:g}"
        if above is not None and got <= above
        else None
    )
    if why is not None:
        out.bad.append(
            BadLine(line, raw, f"field {field!r}: {got!r} is {why}, which no {what} can be: left out")
        )
        return None
    return got


_FRACTION = re.compile(
    r"acc|top_?[15]\b|top[15]_|precision|recall|\bf1|_f1|exact_match|\bem\b", re.IGNORECASE
)
_RATE = re.compile(
    r"per_s(ec(ond)?)?\b|_ips\b|^ips$|throughput|samples/s|tokens/s|img/s|it/s|(?:^|[/_])runtime$|_time$|^time$",
    re.IGNORECASE,
)


def is_rate(name: str, unit: str | None = None) -> bool:
    """A metric that measures speed or time (samples/s, img/s, a runtime), never a quality of the model."""
    return bool(_RATE.search(name) or (unit and ("/s" in unit or unit.strip().lower() in ("s", "ms", "sec"))))


def quality_bounds(metric: str) -> tuple[float | None, float | None]:
    """What a quality metric can be: an accuracy-like fraction lies in [0, 1]; anything else is unbounded here."""
    return (0.0, 1.0) if _FRACTION.search(metric) else (None, None)


def raw_row(row: Mapping[Any, Any]) -> str:
    """A csv.DictReader row as the line it came from (for the quarantine), its extra fields included."""
    fields = [str(v) for k, v in row.items() if k is not None and v is not None]
    return ",".join(fields + [str(v) for v in row.get(None) or []])


def ragged(row: Mapping[Any, Any], header: Sequence[str] | None, line: int) -> BadLine | None:
    """A CSV row with more or fewer fields than its header, named by line for the quarantine (its values would
    land under the wrong columns); None for a whole row."""
    extra, missing = len(row.get(None) or []), sum(v is None for k, v in row.items() if k is not None)
    if not extra and not missing:
        return None
    width = len(header or ())
    return BadLine(
        line,
        raw_row(row),
        f"a row of {width + extra - missing} fields where the header has {width}: "
        "its values cannot be told apart, the row is not read",
    )


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


def configured_world(config: Mapping[str, object]) -> tuple[int, str] | None:
    """The world size a run's config or parameters name (``world_size``, the key torch.distributed and most
    scripts use, or ``WORLD_SIZE``; an integer, or its digits where a tracker keeps parameters as text), with the
    key that named it."""
    for key in ("world_size", "WORLD_SIZE"):
        value = config.get(key)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value, key
    return None


_PLANNED = (
    ("max_steps", "steps"),
    ("epochs", "epochs"),
    ("max_epochs", "epochs"),
    ("num_train_epochs", "epochs"),
)


def configured_length(config: Mapping[str, object]) -> tuple[str, int, str] | None:
    """The training's planned length its config or parameters name (``max_steps`` where positive, the Trainer's
    override, else ``epochs``, ``max_epochs`` or ``num_train_epochs``; a positive integer, or its digits): the key, the count and whether it counts
    epochs or steps. A training that logged less than that did not run to its end, whatever its exit record says."""
    for key, unit in _PLANNED:
        value = config.get(key)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return key, value, unit
    return None


def run_id(tool: str, identity: str) -> str:
    """``<tool>:<hash>`` of what identifies the run in its own log (the same copy anywhere is the same run, so a
    copy is a duplicate and a different run with the same identity a conflict)."""
    return f"{tool}:{hashlib.sha1(identity.encode(), usedforsecurity=False).hexdigest()[:16]}"


def config_hash(what: dict[str, object]) -> str:
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
        self._events: list[tuple[int, dict[str, object]]] = []

    def add(self, line: int, kind: str, time: float, **fields: Any) -> dict[str, object]:
        event: dict[str, object] = {
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

    def numbered(self) -> list[tuple[int, dict[str, object]]]:
        """The events in the order added, seq 0, 1, 2, ..."""
        for i, (_, event) in enumerate(self._events):
            event["seq"] = i
        return list(self._events)
