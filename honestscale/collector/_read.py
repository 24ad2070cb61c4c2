"""An MLPerf log or another tool's log, read by the reader its content names.

A file whose content looks like several formats (a DLLogger log with one ``:::MLLOG`` line, a Megatron log with
one line torchtitan's console also prints) is read as each: the one that finds something in it lands, the others
named in a note; where more than one finds something, the file is refused with each named and what each found (a
file never lands as one of two formats in silence, losing the other's lines).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from honestscale.collector import _mlperf, importers
from honestscale.collector._landing import landed_readers
from honestscale.collector._parsed import NeedsLibrary, Parsed

_FOUND_NOTHING = "no event, energy record or profiled step"
MLPERF_VERSION = 1  # the MLPerf reader's (collector/_mlperf.py), raised as importers' Reader.version is


def reader_tag(fmt: str) -> str | None:
    """The reader that reads a format now, "<format>@<version>"; None for event files (no reader between them and
    the store) and Horovod timelines."""
    if fmt == "mlperf":
        return f"mlperf@{MLPERF_VERSION}"
    reader = importers.FORMATS.get(fmt)
    return f"{fmt}@{reader.version}" if reader else None


@dataclass
class Read:
    format: str  # the format it was read as
    parsed: Parsed | None  # None: refused (``refusal`` says why)
    refusal: str = ""
    notes: list[str] = field(default_factory=list)


def stale(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """The store's files that a reader of today would read differently: path, the reader that landed it, today's."""
    return [(path, was or "a reader from before readers were versioned", now) for path, fmt, was in landed_readers(con)
            if (now := reader_tag(fmt)) is not None and was != now]  # fmt: skip


def _parse(fmt: str, path: Path, text: str, campaign: str | None) -> Parsed:
    if fmt == "mlperf":
        return _mlperf.parse(path, text, campaign=campaign)
    return importers.FORMATS[fmt].parse(path, text, campaign)


def _found(parsed: Parsed) -> str:
    """What a reader found in the file, in words; '' for nothing."""
    parts = [(len(parsed.events), "events"), (len(parsed.energy), "energy records"),
             (len(parsed.profile["steps"]) if parsed.profile else 0, "profiled steps")]  # fmt: skip
    return ", ".join(f"{n:,} {what}" for n, what in parts if n)


def read_log(path: Path, formats: tuple[str, ...], text: str, campaign: str | None) -> Read:
    """The file read as each of ``formats`` (its content's, the likeliest first); see the module's docstring."""
    tried: list[tuple[str, Parsed | None, str]] = []  # format, what it read, why it failed
    for fmt in formats:
        try:
            tried.append((fmt, _parse(fmt, path, text, campaign), ""))
        except NeedsLibrary as exc:  # its tool's library is missing here: refused, so a later ingest reads it
            return Read(fmt, None, f"read as {importers.label(fmt)}: {exc}: nothing of it landed")
        except (
            Exception
        ) as exc:  # a log no reader foresaw: refused with the reader named, the other files land
            tried.append((fmt, None, f"{type(exc).__name__}: {exc}"))
    found = [(fmt, parsed) for fmt, parsed, _ in tried if parsed is not None and _found(parsed)]
    if len(found) > 1:
        each = "; as ".join(f"{importers.label(fmt)}: {_found(parsed)}" for fmt, parsed in found)
        return Read(formats[0], None, f"its content is in {len(found)} formats (as {each}): nothing of it landed, "
                    "since one reading would lose the other's lines; keep each tool's log in a file of its own")  # fmt: skip
    if found:
        fmt, parsed = found[0]
        others = [importers.label(f) for f, _, _ in tried if f != fmt]
        notes = (
            [f"also looks like {' and '.join(others)}, which found {_FOUND_NOTHING} in it"] if others else []
        )
        return Read(fmt, parsed, notes=notes)
    first, got, failed = next((t for t in tried if t[1] is not None), tried[0])
    if got is None:
        return Read(first, None, f"read as {importers.label(first)}, but the reader failed on it ({failed}): "
                    "nothing of it landed (what it held before is kept); report it with the file")  # fmt: skip
    others = [importers.label(f) for f, _, _ in tried if f != first]
    return Read(
        first, got, notes=[f"also tried as {' and '.join(others)}: {_FOUND_NOTHING}"] if others else []
    )
