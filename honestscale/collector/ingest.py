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
from honestscale.collector._native import TYPED_TABLES, Batch, Rejected, Stage
from honestscale.collector._sources import Source
from honestscale.errors import HonestscaleError
from honestscale.store import refresh_runs

BATCH_CHARS = 48 * 2**20  # text validated together: bounds memory, lets DuckDB use every core
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
    con.execute("DELETE FROM markers WHERE file_id = ?", [file_id])
    con.execute("DELETE FROM quarantine WHERE file_id = ?", [file_id])
    if runs:
        # Rare path (a file rewritten in place, or --force): recount those runs from their events.
        literal = "(" + ", ".join("'" + r.replace("'", "''") + "'" for r in runs) + ")"
        con.execute(f"DELETE FROM run_ranks WHERE run_id IN {literal}")
        con.execute(
            "INSERT INTO run_ranks SELECT run_id, rank, count(*), min(seq), max(seq), min(time), max(time), "
            f"any_value(file_id) FROM events WHERE run_id IN {literal} GROUP BY run_id, rank"
        )
    return runs


@dataclass
class _Plan:
    """What to do with one file, decided before its transaction: the lines to validate and land."""

    source: Source
    size: int
    mtime_ns: int
    file_id: int
    is_new: bool
    result: FileResult
    first_number: int = 1  # line number of lines[0]
    lines: list[str | None] = field(default_factory=list)  # consecutive lines from first_number
    mapped: list[tuple[int, str]] = field(default_factory=list)  # MLPerf: (source line, event JSON)
    undecodable: list[tuple[int, bytes]] = field(default_factory=list)
    bad: list[tuple[int, str, int, str]] = field(
        default_factory=list
    )  # (line, raw, size, reason) found early
    tail_number: int | None = None
    end: int = 0
    lines_total: int = 0
    content_hash: str = ""
    chars: int = 0

    @property
    def touch_only(self) -> bool:
        return self.result.action == "unchanged"


class Ingester:
    """Lands sources in an open store, one transaction per file.

    Files are read and validated in batches (many files' lines in one set of vectorised
    queries), then each file commits on its own: its events, typed rows, quarantined lines,
    the runs it touches and its bookkeeping, all or nothing.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, *, campaign: str | None = None, force: bool = False
    ) -> None:
        self.con = con
        self.campaign = campaign
        self.force = force
        if campaign:
            con.execute("INSERT INTO campaigns (name) VALUES (?) ON CONFLICT DO NOTHING", [campaign])
        self._next_id = int(
            con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM ingested_files").fetchall()[0][0]
        )

    def ingest(
        self, sources: Iterable[Source], *, advance: Callable[[Source, FileResult], None] | None = None
    ) -> Summary:
        summary = Summary()
        batch: list[_Plan] = []
        chars = 0
        for source in sources:
            plan = self._plan(source)
            batch.append(plan)
            chars += plan.chars
            if chars >= BATCH_CHARS:
                self._run(batch, summary, advance)
                batch, chars = [], 0
        self._run(batch, summary, advance)
        return summary

    def ingest_file(self, source: Source) -> FileResult:
        return self.ingest([source]).files[0]

    def _run(
        self, plans: list[_Plan], summary: Summary, advance: Callable[[Source, FileResult], None] | None
    ) -> None:
        if not plans:
            return
        stage = Stage(self.con)
        batch = Batch()
        for plan in plans:
            if plan.mapped:
                batch.add_numbered(plan.file_id, plan.mapped)
            elif plan.lines:
                batch.add(plan.file_id, plan.first_number, plan.lines)
        rejected = stage.validate(batch) if batch.items else {}
        try:
            for plan in plans:
                plan.lines, plan.mapped = [], []  # free memory as files commit
                result = self._commit(plan, stage, rejected.get(plan.file_id, []))
                summary.files.append(result)
                if advance is not None:
                    advance(plan.source, result)
        finally:
            stage.close()

    def _plan(self, source: Source) -> _Plan:
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
        if row is None:
            file_id, self._next_id = self._next_id, self._next_id + 1
        else:
            file_id = int(row[0])
        plan = _Plan(
            source,
            stat.st_size,
            stat.st_mtime_ns,
            file_id,
            row is None,
            FileResult(path, source.format, "new"),
        )
        if row is not None:
            plan.result.quarantined = int(row[6])
            if not self.force and row[1] == stat.st_size and row[2] == stat.st_mtime_ns:
                plan.result.action = "unchanged"
                return plan
        try:
            content = read_content(path)
        except OSError as exc:
            raise IngestError(f"cannot read {path}: {exc.strerror}", "check that it is readable") from None
        if content.note:
            plan.result.warnings.append(content.note)
        if source.format == "mlperf":
            self._plan_mlperf(plan, content.data, row)
        else:
            self._plan_native(plan, content.data, row)
        plan.chars = len(content.data)
        return plan

    def _plan_native(self, plan: _Plan, data: bytes, row: tuple[Any, ...] | None) -> None:
        start, first_line = 0, 1
        if row is not None:
            done, lines_done, known_hash = int(row[3]), int(row[4]), str(row[5])
            if self.force:
                plan.result.action = "forced"
            elif len(data) >= done and digest(memoryview(data)[:done]) == known_hash:
                start, first_line = done, lines_done + 1
                plan.result.action = "grown"
            else:
                plan.result.action = "rewritten"
        lines = split_lines(data, start, first_line)
        if plan.result.action == "grown" and lines.end == start and lines.tail is None:
            plan.result.action = "unchanged"
            return
        if not data:
            plan.result.warnings.append("empty file: nothing to ingest")
        plan.first_number, plan.lines = (
            first_line,
            lines.text,
        )  # blank and undecodable lines are skipped in SQL
        plan.undecodable = lines.undecodable
        if lines.tail is not None:
            number = first_line + len(lines.text)
            try:
                tail = lines.tail.decode("utf-8")
                if tail.strip():
                    plan.lines = [*plan.lines, tail]
                    plan.tail_number = number
            except UnicodeDecodeError:
                plan.undecodable.append((number, lines.tail))
                plan.tail_number = number
        plan.end = lines.end
        plan.lines_total = first_line - 1 + len(lines.text)
        plan.content_hash = digest(memoryview(data)[: lines.end])

    def _plan_mlperf(self, plan: _Plan, data: bytes, row: tuple[Any, ...] | None) -> None:
        if row is not None:
            if self.force:
                plan.result.action = "forced"
            elif digest(data) == row[5]:
                plan.result.action = "unchanged"
                return
            else:
                plan.result.action = "rewritten"
        text = data.decode("utf-8", "backslashreplace")
        parsed = _mlperf.parse(plan.source.path, text, campaign=self.campaign)
        plan.mapped = [(n, json.dumps(e, separators=(",", ":"))) for n, e in parsed.events]
        plan.bad = [(b.line, *_cut(b.raw), b.reason) for b in parsed.bad]
        plan.result.other_lines = parsed.other_lines
        plan.result.warnings.extend(parsed.warnings)
        if parsed.repeated:
            plan.result.notes.append(f"{parsed.repeated} repeated :::MLLOG lines (one per rank) counted once")
        plan.end = len(data)
        plan.lines_total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        plan.content_hash = digest(data)

    def _commit(self, plan: _Plan, stage: Stage, rejected: list[Rejected]) -> FileResult:
        result, file_id, path = plan.result, plan.file_id, plan.source.path
        started = time.perf_counter()
        self.con.execute("BEGIN")
        try:
            if plan.touch_only:
                self.con.execute(
                    "UPDATE ingested_files SET size_bytes = ?, mtime_ns = ? WHERE file_id = ?",
                    [plan.size, plan.mtime_ns, file_id],
                )
                self.con.execute("COMMIT")
                return result
            if plan.is_new:
                self.con.execute(
                    "INSERT INTO ingested_files (file_id, path, format, campaign, bytes_ingested, lines_ingested, "
                    "content_hash, first_ingested_at, last_ingested_at) "
                    "VALUES (?, ?, ?, ?, 0, 0, '', current_timestamp, current_timestamp)",
                    [file_id, str(path), plan.source.format, self.campaign],
                )
            touched: set[str] = set()
            if result.action in ("rewritten", "forced"):
                touched = _forget_file(self.con, file_id)
            self.con.execute("DELETE FROM quarantine WHERE file_id = ? AND is_tail", [file_id])
            landed = stage.land(file_id)
            result.events, result.duplicates = landed.events, landed.duplicates
            result.run_ids = landed.run_ids | touched
            result.quarantined = _quarantine(self.con, file_id, path, self._quarantine_rows(plan, rejected))
            refresh_runs(self.con, result.run_ids)
            self.con.execute(
                "UPDATE ingested_files SET size_bytes = ?, mtime_ns = ?, bytes_ingested = ?, lines_ingested = ?, "
                "content_hash = ?, events = (SELECT count(*) FROM events WHERE file_id = ?), "
                "duplicates = CASE WHEN ? THEN duplicates ELSE 0 END + ?, "
                "quarantined = (SELECT count(*) FROM quarantine WHERE file_id = ?), other_lines = ?, "
                "last_ingested_at = current_timestamp, note = ?, campaign = coalesce(?, campaign) WHERE file_id = ?",
                [
                    plan.size,
                    plan.mtime_ns,
                    plan.end,
                    plan.lines_total,
                    plan.content_hash,
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
            result.quarantined = int(
                self.con.execute(
                    "SELECT quarantined FROM ingested_files WHERE file_id = ?", [file_id]
                ).fetchall()[0][0]
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

    @staticmethod
    def _quarantine_rows(plan: _Plan, rejected: list[Rejected]) -> list[tuple[int, str, int, str, bool]]:
        tail_why = (
            "incomplete last line (no newline; the writer was killed mid-line or is still writing; "
            "it is read again when the file grows): "
        )
        rows: list[tuple[int, str, int, str, bool]] = []
        for number, raw_bytes in plan.undecodable:
            text, size = _bytes_raw(raw_bytes)
            tail = number == plan.tail_number
            reason = "not UTF-8 text: binary data, not an event line"
            rows.append((number, text, size, tail_why + reason if tail else reason, tail))
        for line, raw, size, reason in plan.bad:
            rows.append((line, raw, size, reason, False))
        prefix = "mapped MLPerf event invalid: " if plan.source.format == "mlperf" else ""
        for rej in rejected:
            tail = rej.line == plan.tail_number
            rows.append((rej.line, *_cut(rej.raw), (tail_why if tail else prefix) + rej.reason, tail))
        return rows
