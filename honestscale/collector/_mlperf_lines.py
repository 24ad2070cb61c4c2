"""The lines of an MLPerf result log, in every format the rounds used, read into one kind of record.

* ``:::MLLOG {"key": ..., "value": ..., "time_ms": ..., "event_type": ..., "metadata": {...}}`` (v0.7 on);
* ``:::MLL <unix seconds> <key>: {"value": ..., "metadata": {...}}`` (v0.6): the key outside the JSON, the time
  in seconds, no ``event_type`` (it follows from the key's name). Both may sit at the end of other output
  (``Binding: [...] :::MLL ...``) and are repeated once per rank.

Each becomes ``{"key", "value", "time_ms", "event_type", "metadata"}``. A line that carries an MLPerf
marker but cannot be read is a :class:`BadLine` with its reason (quarantined, never skipped). Lines in an
MLPerf-like format that no round used (``:::MLPv0.5.0 ...``, ``MLPerf: resnet [date], key``) are counted as
:attr:`Lines.unknown_format`: the file holds MLPerf results this reader cannot use.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from honestscale import events as ev
from honestscale.collector._parsed import BadLine

MARK = ":::MLLOG"
MARK_V06 = ":::MLL "
_V06 = re.compile(r"\s*(?P<ts>[0-9]+(?:\.[0-9]*)?)\s+(?P<key>[A-Za-z_][\w.]*):\s*(?P<body>.*)$")
# MLPerf-like lines of formats no supported round wrote (v0.5's :::MLPv0.5.0, one v0.6 submitter's own format);
# the file finder looks for the same pattern in a file's first MiB
UNKNOWN_FORMAT = re.compile(r":::MLPv\d|^MLPerf: \w+ \[\d\d/\d\d/\d\d", re.MULTILINE)
FORMATS_READ = "it reads ':::MLLOG {json}' of v0.7 on and ':::MLL <seconds> key: {json}' of v0.6"

# v0.6 keys that later rounds renamed: the record carries the later name
_V06_KEYS = {"num_train_examples": "train_samples", "num_eval_examples": "eval_samples"}


class Record(TypedDict):
    """One MLPerf record, whichever format wrote it."""

    key: str
    value: object
    time_ms: float
    event_type: object  # INTERVAL_START, POINT_IN_TIME, ... (POINT_IN_TIME where a line names none)
    metadata: dict[str, object]


@dataclass
class Lines:
    records: list[tuple[int, Record]] = field(default_factory=list)  # (source line, record)
    bad: list[BadLine] = field(default_factory=list)
    other_lines: int = 0
    repeated: int = 0
    unknown_format: int = 0  # MLPerf-like lines of a format no supported round wrote
    first_unknown: int | None = None  # its first line number
    formats: set[str] = field(default_factory=set)  # "MLLOG", "MLL (v0.6)"


def real(value: Any) -> float | None:
    """A finite number of the log (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _event_type(key: str) -> str:
    if key.endswith("_start"):
        return "INTERVAL_START"
    if key.endswith("_stop"):
        return "INTERVAL_END"
    return "POINT_IN_TIME"


def _decode(body: str, number: int, line: str, what: str) -> tuple[Any, BadLine | None]:
    try:
        rec = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, BadLine(number, line, f"{what} line is not valid JSON: {exc.msg} at column {exc.colno}")
    except RecursionError:
        return None, BadLine(
            number, line, f"{what} line is JSON nested too deeply to decode: not an {what} record"
        )
    try:
        ev.refuse_unpaired_surrogates(body, rec)
    except ev.EventError as err:
        return None, BadLine(number, line, f"{what} line is {err}")
    return rec, None


def _mllog(body: str, number: int, line: str) -> tuple[Record | None, BadLine | None]:
    rec, bad = _decode(body, number, line, "MLLOG")
    if bad is not None:
        return None, bad
    if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
        return None, BadLine(number, line, "MLLOG record without a 'key' string")
    if (time_ms := real(rec.get("time_ms"))) is None:
        return None, BadLine(number, line, f"MLLOG record {rec['key']!r} without a finite numeric 'time_ms'")
    metadata = rec.get("metadata")
    return {
        "key": rec["key"],
        "value": rec.get("value"),
        "time_ms": time_ms,
        "event_type": rec.get("event_type", "POINT_IN_TIME"),  # a line that names none is a point in time
        "metadata": metadata if isinstance(metadata, dict) else {},
    }, None


_JSON_NAMES = {"null": None, "true": True, "false": False}


def _python_literal(body: str) -> dict[str, object] | None:
    """A v0.6 record written as a Python literal (``{"value": 1, "metadata": {'lineno': 7}}``), else None."""
    try:
        tree = ast.parse(body, mode="eval")
        for node in ast.walk(tree):  # JSON's null/true/false beside Python's quotes
            for name, child in ast.iter_fields(node):
                if isinstance(child, ast.Name) and child.id in _JSON_NAMES:
                    setattr(node, name, ast.Constant(_JSON_NAMES[child.id]))
                elif isinstance(child, list):
                    child[:] = [
                        ast.Constant(_JSON_NAMES[c.id])
                        if isinstance(c, ast.Name) and c.id in _JSON_NAMES
                        else c
                        for c in child
                    ]
        value = ast.literal_eval(tree.body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    if not isinstance(value, dict) or any(
        isinstance(v, float) and not math.isfinite(v) for v in value.values()
    ):
        return None
    try:
        json.dumps(value, allow_nan=False)  # only what JSON could have said: no sets, bytes, tuples as keys
    except (TypeError, ValueError):
        return None
    return value


def _mll(body: str, number: int, line: str) -> tuple[Record | None, BadLine | None]:
    m = _V06.match(body)
    if m is None:
        return None, BadLine(
            number, line, "MLL (v0.6) line is not ':::MLL <unix seconds> <key>: {json}': no time or key"
        )
    value, bad = _decode(m["body"], number, line, "MLL")
    if bad is not None:
        # one v0.6 submitter (Intel's minigo) wrote the metadata as a Python dict, not JSON: read the literal
        value = _python_literal(m["body"])
        if value is None:
            return None, bad
    if not isinstance(value, dict):
        return None, BadLine(number, line, f"MLL record {m['key']!r} is not a JSON object with a 'value'")
    seconds = float(m["ts"])
    if not math.isfinite(seconds):
        return None, BadLine(number, line, f"MLL record {m['key']!r} without a finite time")
    key = _V06_KEYS.get(m["key"], m["key"])
    metadata = value.get("metadata")
    return {
        "key": key,
        "value": value.get("value"),
        "time_ms": seconds * 1000.0,
        "event_type": _event_type(key),
        "metadata": metadata if isinstance(metadata, dict) else {},
    }, None


def read(text: str) -> Lines:
    """Every MLPerf record of a log's text, in file order; repeated lines (one per rank) counted once."""
    out = Lines()
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        at = line.find(MARK)
        if at >= 0:
            body, parse, fmt = line[at + len(MARK) :].strip(), _mllog, "MLLOG"
        elif (at := line.find(MARK_V06)) >= 0:
            body, parse, fmt = line[at + len(MARK_V06) :].strip(), _mll, "MLL (v0.6)"
        else:
            if UNKNOWN_FORMAT.search(line):
                out.unknown_format += 1
                out.first_unknown = out.first_unknown or number
            elif line.strip():
                out.other_lines += 1
            continue
        if body in seen:
            out.repeated += 1
            continue
        seen.add(body)
        rec, bad = parse(body, number, line)
        if bad is not None:
            out.bad.append(bad)
        elif rec is not None:
            out.records.append((number, rec))
            out.formats.add(fmt)
    return out
