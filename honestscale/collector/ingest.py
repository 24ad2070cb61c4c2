"""Ingesting files into the store: idempotent, incremental, atomic per file, lossless.

Each file lands in one DuckDB transaction: its events, its typed rows, its quarantined
lines, the recomputed ``runs`` rows and its ``ingested_files`` bookkeeping commit together
or not at all, so a crash or ``kill -9`` mid-file leaves the store as if that file had not
been started. Files are identified by absolute path; what was read is remembered as a
byte offset (up to the last complete line) and a hash of those bytes, so a file that grew
adds only its new lines and an unchanged file adds nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import honestscale
from honestscale.collector import _mlperf
from honestscale.collector._content import digest, read_content, split_lines
from honestscale.collector._native import TYPED_TABLES, Landed, land_lines
from honestscale.collector._sources import Source
from honestscale.errors import HonestscaleError
from honestscale.store import refresh_runs

CHUNK_LINES = 250_000
RAW_LIMIT = 65536


@dataclass
class FileResult:
    path: Path
    format: str
    action: str  # new | grown | rewritten | forced | unchanged
    events: int = 0
    duplicates: int = 0
    quarantined: int = 0
    other_lines: int = 0
    run_ids: set[str] = field(default_factory=set)
    warnings: list[str] = field(
        default_factory=list
    )  # the user should look: hardware unknown, empty file ...
    notes: list[str] = field(default_factory=list)  # for the record: repeated MLLOG lines ...


@dataclass
class Summary:
    files: list[FileResult] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)

    @property
    def events(self) -> int:
        return sum(f.events for f in self.files)

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files)

    @property
    def duplicates(self) -> int:
        return sum(f.duplicates for f in self.files)

    @property
    def runs(self) -> int:
        return len(set().union(*(f.run_ids for f in self.files))) if self.files else 0

    @property
    def changed(self) -> int:
        return sum(1 for f in self.files if f.action != "unchanged")

    def line(self) -> str:
        unchanged = len(self.files) - self.changed
        text = (
            f"{len(self.files)} files ({unchanged} unchanged): {self.events:,} events landed, "
            f"{self.runs} runs touched, {self.quarantined:,} lines quarantined"
        )
        if self.duplicates:
            text += f", {self.duplicates:,} duplicate events skipped"
        if self.skipped:
            text += f", {len(self.skipped)} other files skipped"
        return text


class IngestError(HonestscaleError):
    """A file could not be written to the store; files before it have landed."""


def _cut(raw: str) -> tuple[str, int]:
    size = len(raw.encode("utf-8", "surrogateescape"))
    return (raw if len(raw) <= RAW_LIMIT else raw[:RAW_LIMIT]), size


def _bytes_raw(raw: bytes) -> tuple[str, int]:
    return raw[:RAW_LIMIT].decode("utf-8", "backslashreplace"), len(raw)


def _quarantine(
    con: duckdb.DuckDBPyConnection, file_id: int, path: Path, rows: Iterable[tuple[int, str, int, str, bool]]
) -> int:
    batch = [(file_id, str(path), line, reason, raw, size, tail) for line, raw, size, reason, tail in rows]
    if batch:
        con.executemany("INSERT INTO quarantine VALUES (?, ?, ?, ?, ?, ?, ?, current_timestamp)", batch)
    return len(batch)


def _forget_file(con: duckdb.DuckDBPyConnection, file_id: int) -> set[str]:
    """Remove what an earlier version of a file put in the store; return the runs it touched."""
    runs = {
        r[0]
        for r in con.execute("SELECT DISTINCT run_id FROM events WHERE file_id = ?", [file_id]).fetchall()
    }
    for table in TYPED_TABLES.values():
        con.execute(
            f"DELETE FROM {table} USING events e WHERE e.file_id = ? AND {table}.run_id = e.run_id "
            f"AND {table}.rank = e.rank AND {table}.seq = e.seq",
            [file_id],
        )
    con.execute("DELETE FROM events WHERE file_id = ?", [file_id])
    con.execute("DELETE FROM quarantine WHERE file_id = ?", [file_id])
    return runs


def _land_chunked(con: duckdb.DuckDBPyConnection, file_id: int, first: int, text: list[str | None]) -> Landed:
    total = Landed()
    for offset in range(0, len(text), CHUNK_LINES):
        chunk = text[offset : offset + CHUNK_LINES]
        numbers, lines = [], []
        for i, line in enumerate(chunk):
            if line is not None and line.strip():
                numbers.append(first + offset + i)
                lines.append(line)
        got = land_lines(con, file_id, numbers, lines)
        total.events += got.events
        total.duplicates += got.duplicates
        total.rejected.extend(got.rejected)
        total.run_ids |= got.run_ids
    return total


class Ingester:
    """Lands sources in an open store, one transaction per file."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, *, campaign: str | None = None, force: bool = False
    ) -> None:
        self.con = con
        self.campaign = campaign
        self.force = force
        if campaign:
            con.execute("INSERT INTO campaigns (name) VALUES (?) ON CONFLICT DO NOTHING", [campaign])

    def ingest(
        self, sources: Iterable[Source], *, advance: Callable[[Source, FileResult], None] | None = None
    ) -> Summary:
        summary = Summary()
        for source in sources:
            result = self.ingest_file(source)
            summary.files.append(result)
            if advance is not None:
                advance(source, result)
        return summary

    def ingest_file(self, source: Source) -> FileResult:
        path = source.path
        try:
            stat = path.stat()
        except OSError as exc:
            raise IngestError(
                f"cannot read {path}: {exc.strerror}", "check that it exists and is readable"
            ) from None
        rows = self.con.execute(
            "SELECT file_id, size_bytes, mtime_ns, bytes_ingested, lines_ingested, content_hash, quarantined "
            "FROM ingested_files WHERE path = ?",
            [str(path)],
        ).fetchall()
        row = rows[0] if rows else None
        if row and not self.force and row[1] == stat.st_size and row[2] == stat.st_mtime_ns:
            return FileResult(path, source.format, "unchanged", quarantined=int(row[6]))
        try:
            content = read_content(path)
        except OSError as exc:
            raise IngestError(f"cannot read {path}: {exc.strerror}", "check that it is readable") from None
        started = time.perf_counter()
        self.con.execute("BEGIN")
        try:
            file_id = self._new_file(path, source.format) if row is None else int(row[0])
            if source.format == "mlperf":
                result = self._mlperf(source, file_id, content.data, row)
            else:
                result = self._native(source, file_id, content.data, row)
            if content.note:
                result.warnings.append(content.note)
            if result.action == "unchanged":
                self.con.execute(
                    "UPDATE ingested_files SET size_bytes = ?, mtime_ns = ? WHERE file_id = ?",
                    [stat.st_size, stat.st_mtime_ns, file_id],
                )
            else:
                refresh_runs(self.con, result.run_ids)
                self.con.execute(
                    "UPDATE ingested_files SET size_bytes = ?, mtime_ns = ?, "
                    "events = (SELECT count(*) FROM events WHERE file_id = ?), "
                    "duplicates = CASE WHEN ? THEN duplicates ELSE 0 END + ?, "
                    "quarantined = (SELECT count(*) FROM quarantine WHERE file_id = ?), "
                    "other_lines = ?, last_ingested_at = current_timestamp, note = ?, campaign = coalesce(?, campaign) "
                    "WHERE file_id = ?",
                    [
                        stat.st_size,
                        stat.st_mtime_ns,
                        file_id,
                        result.action == "grown",
                        result.duplicates,
                        file_id,
                        result.other_lines,
                        "; ".join(result.warnings + result.notes) or None,
                        self.campaign,
                        file_id,
                    ],
                )
                self.con.execute(
                    "INSERT INTO ingest_log VALUES (current_timestamp, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        file_id,
                        str(path),
                        result.action,
                        result.events,
                        result.duplicates,
                        result.quarantined,
                        time.perf_counter() - started,
                        honestscale.__version__,
                    ],
                )
            self.con.execute("COMMIT")
        except BaseException as exc:
            self.con.execute("ROLLBACK")
            if isinstance(exc, duckdb.IOException):
                raise IngestError(
                    f"could not write {path} to the store: {exc}",
                    "free disk space or fix the store, then ingest again; files before this one have landed "
                    "and this one was rolled back",
                ) from None
            raise
        return result

    def _new_file(self, path: Path, fmt: str) -> int:
        row = self.con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM ingested_files").fetchall()[0]
        assert row is not None
        file_id = int(row[0])
        self.con.execute(
            "INSERT INTO ingested_files (file_id, path, format, campaign, bytes_ingested, lines_ingested, "
            "content_hash, first_ingested_at, last_ingested_at) "
            "VALUES (?, ?, ?, ?, 0, 0, ?, current_timestamp, current_timestamp)",
            [file_id, str(path), fmt, self.campaign, digest(b"")],
        )
        return file_id

    def _native(self, source: Source, file_id: int, data: bytes, row: tuple[Any, ...] | None) -> FileResult:
        start, first_line, action = 0, 1, "new"
        touched: set[str] = set()
        if row is not None:
            done, lines_done, known_hash = int(row[3]), int(row[4]), str(row[5])
            if self.force:
                action = "forced"
                touched = _forget_file(self.con, file_id)
            elif len(data) >= done and digest(memoryview(data)[:done]) == known_hash:
                start, first_line, action = done, lines_done + 1, "grown"
            else:
                action = "rewritten"
                touched = _forget_file(self.con, file_id)
        result = FileResult(source.path, "native", action)
        self.con.execute("DELETE FROM quarantine WHERE file_id = ? AND is_tail", [file_id])
        lines = split_lines(data, start, first_line)
        if action == "grown" and lines.end == start and lines.tail is None:
            result.action = "unchanged"
            return result
        if not data:
            result.warnings.append("empty file: nothing to ingest")
        landed = _land_chunked(self.con, file_id, first_line, lines.text)
        quarantine: list[tuple[int, str, int, str, bool]] = []
        for number, raw in lines.undecodable:
            text, size = _bytes_raw(raw)
            quarantine.append((number, text, size, "not UTF-8 text: binary data, not an event line", False))
        for rej in landed.rejected:
            quarantine.append((rej.line, *_cut(rej.raw), rej.reason, False))
        if lines.tail is not None:
            tail_number = first_line + len(lines.text)
            tail = self._tail(file_id, tail_number, lines.tail, landed)
            if tail is not None:
                quarantine.append(tail)
        result.events, result.duplicates = landed.events, landed.duplicates
        result.quarantined = _quarantine(self.con, file_id, source.path, quarantine)
        result.run_ids = landed.run_ids | touched
        self.con.execute(
            "UPDATE ingested_files SET bytes_ingested = ?, lines_ingested = ?, content_hash = ? WHERE file_id = ?",
            [lines.end, first_line - 1 + len(lines.text), digest(memoryview(data)[: lines.end]), file_id],
        )
        return result

    def _tail(
        self, file_id: int, number: int, tail: bytes, landed: Landed
    ) -> tuple[int, str, int, str, bool] | None:
        """An unterminated last line: land it if it is a whole event, else quarantine it until the file grows."""
        try:
            text = tail.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and not text.strip():
            return None
        if text is not None:
            got = land_lines(self.con, file_id, [number], [text])
            if got.events or got.duplicates:
                landed.events += got.events
                landed.duplicates += got.duplicates
                landed.run_ids |= got.run_ids
                return None
            why = got.rejected[0].reason if got.rejected else "not an event"
            raw, size = _cut(text)
        else:
            why = "not UTF-8 text"
            raw, size = _bytes_raw(tail)
        reason = (
            f"incomplete last line (no newline; the writer was killed mid-line or is still writing; "
            f"it is read again when the file grows): {why}"
        )
        return (number, raw, size, reason, True)

    def _mlperf(self, source: Source, file_id: int, data: bytes, row: tuple[Any, ...] | None) -> FileResult:
        if row is None:
            action = "new"
        elif self.force:
            action = "forced"
        elif digest(data) == row[5]:
            return FileResult(source.path, "mlperf", "unchanged")
        else:
            action = "rewritten"
        result = FileResult(source.path, "mlperf", action)
        touched = set() if row is None else _forget_file(self.con, file_id)
        text = data.decode("utf-8", "backslashreplace")
        parsed = _mlperf.parse(source.path, text, campaign=self.campaign)
        numbers = [n for n, _ in parsed.events]
        lines = [json.dumps(e, separators=(",", ":")) for _, e in parsed.events]
        landed = land_lines(self.con, file_id, numbers, lines)
        quarantine = [(b.line, *_cut(b.raw), b.reason, False) for b in parsed.bad]
        quarantine += [
            (r.line, *_cut(r.raw), f"mapped MLPerf event invalid: {r.reason}", False) for r in landed.rejected
        ]
        result.events, result.duplicates = landed.events, landed.duplicates
        result.quarantined = _quarantine(self.con, file_id, source.path, quarantine)
        result.other_lines = parsed.other_lines
        result.run_ids = landed.run_ids | touched
        result.warnings.extend(parsed.warnings)
        if parsed.repeated:
            result.notes.append(f"{parsed.repeated} repeated :::MLLOG lines (one per rank) counted once")
        lines_total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        self.con.execute(
            "UPDATE ingested_files SET bytes_ingested = ?, lines_ingested = ?, content_hash = ? WHERE file_id = ?",
            [len(data), lines_total, digest(data), file_id],
        )
        return result
