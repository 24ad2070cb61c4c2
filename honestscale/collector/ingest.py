"""Ingesting files into the store: idempotent, incremental, atomic per file, lossless.

Files are read, then validated and landed in batches (about ``HONESTSCALE_INGEST_BATCH_MB`` of text, 96 MiB by
default, and at most ``BATCH_FILES`` files): each batch is one DuckDB transaction holding whole files only: their
events, typed rows, quarantined lines, the recomputed ``runs`` rows and their ``ingested_files`` bookkeeping commit
together or not at all. A crash or ``kill -9`` mid-ingest therefore never leaves part of a file: the file in progress
(and the others of its batch) are as if not started, and the next ingest lands them. Files are identified by
absolute path; what was read is remembered as a byte offset (up to the last complete line) and a hash of those
bytes, so a file that grew adds only its new lines and an unchanged file adds nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

import honestscale
from honestscale import events as ev
from honestscale.collector import _timeline, importers
from honestscale.collector._content import (
    BOM,
    LINE_LIMIT,
    Content,
    NotRegular,
    TooLarge,
    digest,
    read_content,
    split_lines,
)
from honestscale.collector._landing import (
    MAX_ATTEMPTS,
    Conflict,
    IngestError,
    IngestLater,
    claim,
    forget_file,
    land_energy,
    land_profile,
    next_file_id,
    transaction,
)
from honestscale.collector._native import (
    Landed,
    Rejected,
    Stage,
    lines_batch,
    numbered_batch,
    shaped,
)
from honestscale.collector._read import read_log, reader_tag
from honestscale.collector._sources import Source, discover
from honestscale.collector._summary import FileResult, Summary
from honestscale.collector._twins import supersede_twins
from honestscale.errors import HonestscaleError
from honestscale.files import interrupts_held
from honestscale.store import cursor, refresh_runs

BATCH_ENV = "HONESTSCALE_INGEST_BATCH_MB"
RAW_LIMIT = 65536


# At most this many files a batch: a batch of many small files costs about twelve times its bytes at the peak (each
# file's plan, rows and runs), where one of few large files costs four. benchmarks/scale.py's 9,408 files (963,648
# events, 276 MB): 1,710 MiB at the peak in batches of 96 MiB alone, 774 MiB with this bound, 13 % slower (21.9 ->
# 24.8 s); 2,352 of them: 1,212 -> 664 MiB. benchmarks/ingest.py's 64 files are not bounded by it.
BATCH_FILES = 512


def _batch_bytes() -> int:
    """Files are validated and land together, one transaction per batch of about this much text: it
    bounds memory, lets DuckDB use every core, and spreads a commit over many files. Each batch costs about 0.1 s
    of statements and a checkpoint whatever its size: 96 MiB ingests 10^6 events 0.7 s sooner than 48 MiB did
    (benchmarks/ingest.py), for about 150 MiB more at the peak (two batches are in memory: one read, one landing)."""
    value = os.environ.get(BATCH_ENV, "96")
    try:
        mib = float(value)
    except ValueError:
        mib = -1.0
    if not 0 < mib <= 65536:
        raise HonestscaleError(
            f"{BATCH_ENV}={value!r} is not a size in MiB", f"unset it, or set e.g. {BATCH_ENV}=48"
        )
    return int(mib * 2**20)


def _landed(reader: duckdb.DuckDBPyConnection, todo: list[Source]) -> dict[str, tuple[Any, ...]]:
    """The bookkeeping of the files of ``todo`` landed before (file_id, size_bytes, mtime_ns, bytes_ingested,
    lines_ingested, content_hash, quarantined, format, reader), by path, read in one query for the whole pipeline (a
    DuckLake catalog answers each query in about 10 ms: one per file cost half a second in 64). Another writer may
    land one of them meanwhile: each batch's claim checks its plans against the bookkeeping again, in its
    transaction, and plans them again if it changed."""
    rows = reader.execute(
        "SELECT path, file_id, size_bytes, mtime_ns, bytes_ingested, lines_ingested, content_hash, quarantined, "
        "format, reader FROM ingested_files WHERE path IN (SELECT unnest(?::VARCHAR[]))",
        [[s.key for s in todo]],
    ).fetchall()
    return {str(r[0]): tuple(r[1:]) for r in rows}


def _cut(raw: str) -> tuple[str, int]:
    size = len(raw.encode("utf-8", "surrogateescape"))
    return (raw if len(raw) <= RAW_LIMIT else raw[:RAW_LIMIT]), size


def _bytes_raw(raw: bytes) -> tuple[str, int]:
    return raw[:RAW_LIMIT].decode("utf-8", "backslashreplace"), len(raw)


def _undecodable_reason(raw: bytes) -> str:
    """The contract's reason for a line that is not UTF-8 (it names the first bad byte)."""
    try:
        ev.parse_line(raw)
    except ev.EventError as err:
        return str(err)
    return "not UTF-8 text: binary data, not an event line"


def _stale(fmt: Any, reader: Any) -> bool:
    """A file landed by another version of its format's reader than the one that reads it now."""
    now = reader_tag(str(fmt))
    return now is not None and reader != now


@dataclass
class _Plan:
    """What to do with one file, decided before its transaction: the lines to validate and land."""

    source: Source
    size: int
    mtime_ns: int
    file_id: int
    is_new: bool
    result: FileResult
    arrow: pa.RecordBatch | None = None  # (file_id, line, raw) of the lines to validate and land
    undecodable: list[tuple[int, bytes]] = field(default_factory=list)
    # (line, raw, size, reason) of lines rejected before validation (broken :::MLLOG lines)
    bad: list[tuple[int, str, int, str]] = field(default_factory=list)
    tail_number: int | None = None
    # forget what the file landed before, then land it whole (--force, a grown MLPerf log)
    replace: bool = False
    end: int = 0
    lines_total: int = 0
    content_hash: str = ""
    chars: int = 0
    profile: dict[str, object] | None = None  # a profiler trace's steps (evidence, profile_steps)
    energy: list[dict[str, object]] = field(default_factory=list)  # energy records (energy_records)
    # the bookkeeping the plan was made from (file_id, bytes, content hash), None for a new file: checked again
    # inside the transaction, where another writer may have landed the file meanwhile
    seen: tuple[Any, ...] | None = None
    stale: bool = False  # landed by an earlier version of its reader: read again

    @property
    def touch_only(self) -> bool:
        return self.result.action == "unchanged"

    @property
    def lands(self) -> bool:
        return self.result.action not in ("unchanged", "kept", "refused")


class Ingester:
    """Lands sources in an open store, whole files only, one transaction per batch of files."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, *, campaign: str | None = None, force: bool = False
    ) -> None:
        self.con = con
        self.campaign = campaign
        self.force = force
        self.batch_bytes = _batch_bytes()
        # Row order inside tables carries no meaning here (every read orders explicitly): letting DuckDB
        # insert out of order parallelises the inserts.
        con.execute("SET preserve_insertion_order = false")
        if campaign:
            con.execute(  # no ON CONFLICT: a DuckLake store has no keys
                "INSERT INTO campaigns (name, created_at) SELECT ?, current_timestamp "
                "WHERE NOT EXISTS (SELECT 1 FROM campaigns WHERE name = ?)",
                [campaign, campaign],
            )
        self._next_id = next_file_id(con)
        # files read again in this ingest because files read with them are new or changed: their names
        self._again: dict[Path, list[str]] = {}

    def ingest(
        self, sources: Iterable[Source], *, advance: Callable[[Source, FileResult], None] | None = None
    ) -> Summary:
        """Land ``sources``; while one batch lands, a thread reads and splits the files of the next."""
        summary = Summary()
        sources = list(sources)
        timelines = [s.path for s in sources if s.format == "horovod-timeline"]
        todo = [s for s in sources if s.format != "horovod-timeline"]
        self._retried(todo, summary, advance)
        # a file new or changed beside the file it is read with: that file is read again whole
        if again := _read_with_changed(summary, todo):
            self._again = {s.path: names for s, names in again}
            summary.files = [f for f in summary.files if f.path not in self._again]
            self._retried([s for s, _ in again], summary, advance)
            self._again = {}
        for path in timelines:  # after the events: they annotate steps that must already be there
            with transaction(self.con, f"the Horovod timeline {path}"):
                summary.timeline_steps += _timeline.apply(self.con, path)
        return summary

    def _retried(
        self, todo: list[Source], summary: Summary, advance: Callable[[Source, FileResult], None] | None
    ) -> None:
        """The pipeline, planned again for the files not landed where another writer committed first."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                self._pipeline(todo, summary, advance)
                return
            except Conflict as exc:  # another writer of a shared store committed first: plan the rest again
                done = {f.path for f in summary.files}
                todo = [s for s in todo if s.path not in done]
                if attempt == MAX_ATTEMPTS:
                    raise IngestLater(
                        f"other writers of the store committed first {MAX_ATTEMPTS} times running ({exc}): "
                        f"{len(todo)} files did not land",
                        "run the same ingest again: every file that landed is kept, the rest lands then",
                    ) from None
                time.sleep(random.uniform(0.05, 0.2) * min(attempt, 10))  # a back-off, not a secret
                self._next_id = next_file_id(self.con)

    def _pipeline(
        self, todo: list[Source], summary: Summary, advance: Callable[[Source, FileResult], None] | None
    ) -> None:
        """Plan and land ``todo`` in batches; while one batch lands, a thread reads and splits the next."""
        pending = iter(todo)
        reader = cursor(self.con)  # the planner's own connection: it only reads committed bookkeeping
        landed = _landed(reader, todo)

        def next_batch() -> tuple[list[_Plan], pa.Table | None]:
            plans: list[_Plan] = []
            size = 0
            for source in pending:
                plan = self._plan(source, landed.get(source.key))
                plans.append(plan)
                size += plan.chars
                if size >= self.batch_bytes or len(plans) >= BATCH_FILES:
                    break
            batches = [p.arrow for p in plans if p.arrow is not None and p.arrow.num_rows]
            for plan in plans:
                plan.arrow = None
            return plans, shaped(reader, batches)

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="honestscale-read")
        ahead = pool.submit(next_batch)
        try:
            while (got := ahead.result())[0]:
                ahead = pool.submit(next_batch)
                self._run(*got, summary, advance)
        except BaseException:  # a conflict, an error, Ctrl-C: the batch read ahead is not wanted
            ahead.cancel()
            reader.interrupt()  # its query, if one runs, stops now
            raise
        finally:
            # The read-ahead ends before its connection closes, and a second Ctrl-C cannot cut the wait: closing the
            # connection under a running query aborts the process ("terminate called without an active
            # exception", seen when a user pressed again while a loaded machine was still stopping).
            with interrupts_held():
                pool.shutdown(wait=True)
                reader.close()

    def _run(
        self,
        plans: list[_Plan],
        batch: pa.Table | None,
        summary: Summary,
        advance: Callable[[Source, FileResult], None] | None,
    ) -> None:
        if not plans:
            return
        stage = Stage(self.con)
        try:
            rejected = stage.validate(batch)
            del batch
            started = time.perf_counter()
            with transaction(self.con, f"the {len(plans)} files of this batch (from {plans[0].source.path})"):
                self._land(plans, stage, rejected, started)
        except BaseException:
            # The failure in flight is the one to report. After a full disk DuckDB's rollback can itself fail and
            # invalidate the database; dropping the temp tables then raises "database has been invalidated", which
            # would replace the IngestError that says the disk is full (seen in CI: 48 MB batches, 1500 KiB free).
            with suppress(duckdb.Error):
                stage.close()
            raise
        stage.close()
        for plan in plans:
            summary.files.append(plan.result)
            if advance is not None:
                advance(plan.source, plan.result)

    def _plan(self, source: Source, row: tuple[Any, ...] | None) -> _Plan:
        """What to do with ``source``, given its bookkeeping (None: not landed before)."""
        path = source.path
        try:
            stat = path.stat()
        except OSError as exc:
            raise IngestError(
                f"cannot read {path}: {exc.strerror}", "check that it exists and is readable"
            ) from None
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
            FileResult(path, source.format, "new", recognised=source.recognised),
        )
        if row is not None:
            plan.seen = (int(row[0]), row[3], row[5])
            plan.result.quarantined = int(row[6])
            plan.stale = _stale(row[7], row[8])
            unchanged = row[1] == stat.st_size and row[2] == stat.st_mtime_ns
            if not self.force and not plan.stale and unchanged and path not in self._again:
                plan.result.action = "unchanged"
                return plan
        try:
            content = read_content(path)
        except (NotRegular, TooLarge) as exc:
            plan.result.action = "refused"
            plan.result.warnings.append(str(exc))
            return plan
        except OSError as exc:
            raise IngestError(f"cannot read {path}: {exc.strerror}", "check that it is readable") from None
        if content.note:
            plan.result.warnings.append(content.note)
        plan.chars = len(content.data)
        if source.format == "native":
            self._plan_native(plan, content.data, row)
        else:
            self._plan_parsed(plan, content, row)
        return plan

    def _plan_native(self, plan: _Plan, data: bytes, row: tuple[Any, ...] | None) -> None:
        start, first_line = 0, 1
        if row is not None:
            done, lines_done, known_hash = int(row[3]), int(row[4]), str(row[5])
            if self.force:
                plan.result.action, plan.replace = "forced", True
            elif len(data) >= done and digest(memoryview(data)[:done]) == known_hash:
                start, first_line = done, lines_done + 1
                plan.result.action = "grown"
            else:
                self._keep(plan, len(data), done)
                return
        if start == 0 and data.startswith(BOM):
            start = len(BOM)  # a UTF-8 byte order mark (an editor on Windows): not part of the first event
        lines = split_lines(data, start, first_line)
        if plan.result.action == "grown" and lines.end == start and lines.tail is None:
            plan.result.action = "unchanged"
            return
        if not data:
            plan.result.warnings.append("empty file: nothing to ingest")
        texts = self._bound_lines(plan, lines.text, first_line)  # blank and null lines are skipped in SQL
        plan.undecodable = lines.undecodable
        if lines.tail is not None and len(lines.tail) > LINE_LIMIT and plan.source.path.name.endswith(".gz"):
            # a .gz is written whole (it does not grow): its last line is all there is, quarantined like a long line
            raw, size = _bytes_raw(lines.tail)
            plan.bad.append((first_line + len(lines.text), raw, size,
                             f"a last line of {size:,} bytes without a line end, longer than any event "
                             f"({LINE_LIMIT:,} bytes at most), in a .gz file (which does not grow): not parsed"))  # fmt: skip
        elif lines.tail is not None and len(lines.tail) > LINE_LIMIT:
            plan.result.warnings.append(
                f"its last line is {len(lines.tail):,} bytes long and unfinished: read when the file grows"
            )
        elif lines.tail is not None:
            number = first_line + len(lines.text)
            try:
                tail = lines.tail.decode("utf-8")
                if tail.strip():
                    texts = pa.concat_arrays([texts, pa.array([tail], pa.large_string())])
                    plan.tail_number = number
            except UnicodeDecodeError:
                plan.undecodable.append((number, lines.tail))
                plan.tail_number = number
        plan.arrow = lines_batch(plan.file_id, first_line, texts)
        plan.end = lines.end
        plan.lines_total = first_line - 1 + len(lines.text)
        plan.content_hash = digest(memoryview(data)[: lines.end])

    @staticmethod
    def _keep(plan: _Plan, size: int, done: int) -> None:
        """The file no longer starts with what landed from it: the store keeps it (never deleted, never downgraded
        by a file cut short, emptied or edited after it landed) and the ingest names the file and exits 3."""
        plan.result.action = "kept"
        how = (
            "was emptied" if size == 0
            else f"shrank from {done:,} to {size:,} bytes" if size < done
            else f"changed in its first {done:,} bytes"
        )  # fmt: skip
        plan.result.warnings.append(
            f"{how} since it landed: the store keeps what it holds from it; restore the file, or ingest it "
            "with --force to replace its events with what it holds now"
        )

    @staticmethod
    def _bound_lines(plan: _Plan, texts: pa.Array, first_line: int) -> pa.Array:
        """Lines longer than LINE_LIMIT are quarantined (their start kept), never parsed."""
        if not len(texts):
            return texts
        lengths = pc.binary_length(texts)
        if (pc.max(lengths).as_py() or 0) <= LINE_LIMIT:  # (no Python scalar here: it would import pandas)
            return texts
        long = pc.greater(lengths, LINE_LIMIT)
        for i in pc.indices_nonzero(long).to_pylist():
            raw, size = _cut(texts[i].as_py())
            why = (
                f"a line of {size:,} bytes, longer than any event ({LINE_LIMIT:,} bytes at most): not parsed"
            )
            plan.bad.append((first_line + i, raw, size, why))
        return pc.if_else(long, pa.scalar(None, pa.large_string()), texts)

    def _plan_parsed(self, plan: _Plan, content: Content, row: tuple[Any, ...] | None) -> None:
        """An MLPerf log or another tool's log: read whole (again, when it grew) into events. The file's bytes are
        let go before its reader runs (a tracker's store of 10^6 values need not sit in memory beside its events)."""
        data = content.data
        if row is not None:
            done = int(row[3])
            if self.force:
                plan.result.action = "forced"
            elif (beside := self._again.get(plan.source.path)) is not None and (
                len(data) >= done and digest(memoryview(data)[:done]) == row[5]
            ):  # (one no longer starting with what landed is kept, as below)
                plan.result.action = "reread"
                plan.result.notes.append(
                    f"read again whole: {', '.join(beside)} beside it, read with it as one run, is new or changed"
                )
            elif plan.stale and len(data) >= done and digest(memoryview(data)[:done]) == row[5]:
                plan.result.action = "reread"
                was = row[8] or "a reader from before readers were versioned"
                plan.result.notes.append(
                    f"read again: {was} landed it, {reader_tag(str(row[7]))} reads it now"
                )
            elif len(data) == done and digest(data) == row[5]:
                plan.result.action = "unchanged"
                return
            elif len(data) > done and digest(memoryview(data)[:done]) == row[5]:
                plan.result.action = "grown"  # a log still being written: parsed again whole
            elif importers.in_place(plan.source.format):
                plan.result.action = "reread"  # a tracker's database changes in place: read again whole
                said = importers.label(plan.source.format)
                plan.result.notes.append(
                    f"changed since it landed: a {said} changes in place, read again whole"
                )
            else:
                self._keep(plan, len(data), done)
                return
            plan.replace = True
        formats = (plan.source.format, *plan.source.also)
        binary = importers.binary(formats)
        text = "" if binary else data.decode("utf-8", "backslashreplace").removeprefix("\ufeff")
        size, content_hash, empty = len(data), digest(data), not data if binary else not text
        lines_total = data.count(b"\n") + (0 if data.endswith(b"\n") or empty else 1)
        content.data = data = b""
        read = read_log(plan.source.path, formats, text, self.campaign)
        if read.parsed is None:
            plan.result.action, plan.replace = "refused", False
            plan.result.warnings.append(read.refusal)
            return
        parsed = read.parsed
        if read.format != plan.source.format:
            plan.source = replace(plan.source, format=read.format, also=())
            plan.result.format = read.format
        if read.format != "mlperf":
            plan.result.notes.insert(0, f"read as {importers.label(read.format)}")
        plan.result.notes.extend(read.notes)
        events, parsed.events = parsed.events, []
        plan.arrow = numbered_batch(plan.file_id, _serialised(events))
        plan.bad = [(b.line, *_cut(b.raw), b.reason) for b in parsed.bad]
        plan.result.other_lines = parsed.other_lines
        plan.result.warnings.extend(parsed.warnings)
        plan.result.notes.extend(parsed.notes)
        plan.result.unread_system = parsed.unread_system
        plan.result.read_with = parsed.read_with
        plan.result.nothing_to_land = parsed.nothing_to_land
        plan.profile = parsed.profile
        plan.result.profile_steps = len(parsed.profile["steps"]) if parsed.profile else 0
        plan.energy = parsed.energy
        plan.result.energy_records = len(parsed.energy)
        if parsed.repeated:
            plan.result.notes.append(f"{parsed.repeated} repeated :::MLLOG lines (one per rank) counted once")
        plan.end, plan.lines_total, plan.content_hash = size, lines_total, content_hash

    def _land(
        self, plans: list[_Plan], stage: Stage, rejected: dict[int, list[Rejected]], started: float
    ) -> None:
        """Everything a batch of files changes in the store, inside the batch's transaction."""
        claim(self.con, plans)
        self._touch([p for p in plans if p.touch_only])
        active = [p for p in plans if p.lands]
        if not active:
            return
        self._register([p for p in active if p.is_new])
        self._forget(active)
        landed = stage.land(self._may_repeat)
        self._quarantine(active, landed, rejected)
        for plan in active:
            if plan.profile and plan.profile["steps"]:
                land_profile(self.con, plan.file_id, plan.profile)
            if plan.energy:
                land_energy(self.con, plan.file_id, plan.energy)
        touched = set().union(*(p.result.run_ids for p in active))
        refresh_runs(self.con, touched)
        for logged, recorded, why in supersede_twins(self.con, touched):
            for plan in (p for p in active if p.result.run_ids & {logged, recorded}):
                plan.result.notes.append(f"run {logged} (a tool's log) is {why}")
        self._count_quarantined(active)
        self._book(active, time.perf_counter() - started)

    def _touch(self, touch: list[_Plan]) -> None:
        """Files whose content is unchanged but whose size or time moved: only their bookkeeping."""
        if touch:
            self.con.executemany(
                "UPDATE ingested_files SET size_bytes = ?, mtime_ns = ? WHERE file_id = ?",
                [[p.size, p.mtime_ns, p.file_id] for p in touch],
            )

    def _register(self, new_files: list[_Plan]) -> None:
        """Files seen for the first time: their row in ingested_files (filled in by ``_book``)."""
        if new_files:
            self.con.executemany(
                "INSERT INTO ingested_files (file_id, path, format, campaign, bytes_ingested, lines_ingested, "
                "content_hash, first_ingested_at, last_ingested_at) "
                "VALUES (?, ?, ?, ?, 0, 0, '', current_timestamp, current_timestamp)",
                [[p.file_id, p.source.key, p.source.format, self.campaign] for p in new_files],
            )

    def _forget(self, active: list[_Plan]) -> None:
        """What replaced files held is forgotten, and their quarantined tails; ``_touched`` lists every run the
        batch changes (what it stages and what it forgot)."""
        forgotten: set[str] = set()
        for plan in active:
            if plan.replace:
                plan.result.run_ids |= forget_file(self.con, plan.file_id)
                forgotten |= plan.result.run_ids
        self.con.execute(
            "DELETE FROM quarantine WHERE is_tail AND file_id IN (SELECT unnest(?::INTEGER[]))",
            [[p.file_id for p in active]],
        )
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE _touched AS SELECT DISTINCT run_id FROM _acc "
            "UNION SELECT unnest(?::VARCHAR[])",
            [sorted(forgotten)],
        )

    def _quarantine(
        self, active: list[_Plan], landed: dict[int, Landed], rejected: dict[int, list[Rejected]]
    ) -> None:
        """Each file's counts from the landing, and every line it did not land into the quarantine, with why."""
        rows: list[tuple[int, str, int, str, int, str, bool]] = []
        for plan in active:
            got = landed.get(plan.file_id)
            if got is not None:
                plan.result.events, plan.result.duplicates = got.events, got.duplicates
                plan.result.conflicts = got.conflicts
                plan.result.run_ids |= got.run_ids
            path = plan.source.key
            keep = (
                plan.source.recognised
            )  # the text of a file no reader recognised is never kept (a link's target)
            for line, raw, size, reason, tail in self._quarantine_rows(plan, rejected.get(plan.file_id, [])):
                rows.append((plan.file_id, path, line, reason, size, raw if keep else "", tail))
            for held in got.held if got is not None else []:
                raw, size = _cut(held.raw)
                rows.append((plan.file_id, path, held.line, held.reason, size, raw, False))
        if rows:
            columns = [list(c) for c in zip(*rows, strict=True)]
            self.con.execute(
                "INSERT INTO quarantine SELECT unnest(?::INTEGER[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]), "
                "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::BOOLEAN[]), current_timestamp",
                [columns[0], columns[1], columns[2], columns[3], columns[5], columns[4], columns[6]],
            )

    def _count_quarantined(self, active: list[_Plan]) -> None:
        counts = dict(
            self.con.execute(
                "SELECT file_id, count(*) FROM quarantine WHERE file_id IN (SELECT unnest(?::INTEGER[])) "
                "GROUP BY file_id",
                [[p.file_id for p in active]],
            ).fetchall()
        )
        for plan in active:
            plan.result.quarantined = int(counts.get(plan.file_id, 0))

    def _book(self, active: list[_Plan], seconds: float) -> None:
        """Each file's bookkeeping (how far it was read, its hash, its counts) and the ingest log's rows."""
        con = self.con
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _book AS SELECT unnest(?::INTEGER[]) AS file_id, unnest(?::BIGINT[]) AS size, "
            "unnest(?::BIGINT[]) AS mtime, unnest(?::BIGINT[]) AS done, unnest(?::BIGINT[]) AS lines, "
            "unnest(?::VARCHAR[]) AS hash, unnest(?::BOOLEAN[]) AS grown, unnest(?::BIGINT[]) AS events, "
            "unnest(?::BIGINT[]) AS duplicates, unnest(?::BIGINT[]) AS quarantined, unnest(?::BIGINT[]) AS other_lines, "
            "unnest(?::VARCHAR[]) AS note, unnest(?::VARCHAR[]) AS path, unnest(?::VARCHAR[]) AS action, "
            "unnest(?::VARCHAR[]) AS reader",
            [
                [p.file_id for p in active],
                [p.size for p in active],
                [p.mtime_ns for p in active],
                [p.end for p in active],
                [p.lines_total for p in active],
                [p.content_hash for p in active],
                [p.result.action == "grown" and not p.replace for p in active],
                [p.result.events for p in active],
                [p.result.duplicates for p in active],
                [p.result.quarantined for p in active],
                [p.result.other_lines for p in active],
                ["; ".join(p.result.warnings + p.result.notes) or None for p in active],
                [p.source.key for p in active],
                [p.result.action for p in active],
                [reader_tag(p.source.format) for p in active],
            ],
        )
        try:
            con.execute(
                "UPDATE ingested_files AS f SET size_bytes = b.size, mtime_ns = b.mtime, bytes_ingested = b.done, "
                "lines_ingested = b.lines, content_hash = b.hash, "
                "events = CASE WHEN b.grown THEN f.events ELSE 0 END + b.events, "
                "duplicates = CASE WHEN b.grown THEN f.duplicates ELSE 0 END + b.duplicates, "
                "quarantined = b.quarantined, other_lines = b.other_lines, last_ingested_at = current_timestamp, "
                "note = b.note, campaign = coalesce(?, f.campaign), format = CASE WHEN b.reader IS NULL THEN f.format "
                "ELSE split_part(b.reader, '@', 1) END, reader = b.reader FROM _book b WHERE f.file_id = b.file_id",
                [self.campaign],
            )
            con.execute(
                "INSERT INTO ingest_log SELECT current_timestamp, file_id, path, action, events, duplicates, "
                "quarantined, ?, ? FROM _book",
                [seconds, honestscale.__version__],
            )
        finally:
            con.execute("DROP TABLE _book")

    def _may_repeat(self, ranges: list[tuple[Any, ...]]) -> bool:
        """Whether events of the batch could already be in the store, or repeat within the batch.

        Usually not: new files, or grown ones whose new seqs all lie past what the store holds
        for each (run, rank). Only then is the (costlier) anti-join needed.
        """
        spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for _file, run_id, rank, lo, hi, count, distinct in ranges:
            if count != distinct:
                return True
            spans.setdefault((run_id, rank), []).append((lo, hi))
        for run_id, rank, lo, hi in self.con.execute(
            "SELECT r.run_id, r.rank, r.first_seq, r.last_seq FROM run_ranks r SEMI JOIN _touched t USING (run_id)"
        ).fetchall():
            spans.setdefault((run_id, rank), []).append((lo, hi))
        for intervals in spans.values():
            intervals.sort()
            if any(b[0] <= a[1] for a, b in itertools.pairwise(intervals)):
                return True
        return False

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
            reason = _undecodable_reason(raw_bytes)
            rows.append((number, text, size, tail_why + reason if tail else reason, tail))
        for line, raw, size, reason in plan.bad:
            rows.append((line, raw, size, reason, False))
        fmt = plan.source.format
        prefix = "" if fmt == "native" else f"mapped {importers.label(fmt)} event invalid: "
        for rej in rejected:
            tail = rej.line == plan.tail_number
            rows.append((rej.line, *_cut(rej.raw), (tail_why if tail else prefix) + rej.reason, tail))
        return rows


def _serialised(events: list[tuple[int, dict[str, object]]]) -> Iterator[tuple[int, str]]:
    """Each event as its JSON line, in order, each dropped from ``events`` once written: the file's events as
    objects and as text are never both held whole (a tracker's run of 10^6 values)."""
    for i, (line, event) in enumerate(events):
        events[i] = _GONE
        yield line, json.dumps(event, separators=(",", ":"))
    events.clear()


_GONE: tuple[int, dict[str, object]] = (0, {})


def _read_with_changed(summary: Summary, todo: list[Source]) -> list[tuple[Source, list[str]]]:
    """The files to read again, each with the names of the files beside it that are new or changed and that its
    reader reads with it (a TensorBoard folder's later event file, written when the Trainer's final evaluation opened
    its writer again), where this ingest did not read it after them: it found it unchanged, or was not given it."""
    read = {f.path for f in summary.files if f.action != "unchanged"}
    beside: dict[Path, list[str]] = {}
    for f in summary.files:
        if f.read_with is not None and f.action != "unchanged" and f.read_with not in read:
            beside.setdefault(f.read_with, []).append(f.path.name)
    given = {s.path: s for s in todo}
    out: list[tuple[Source, list[str]]] = []
    for path, names in beside.items():
        source = given.get(path) or next(iter(discover([str(path)]).sources), None)
        if source is not None:
            out.append((source, names))
    return out
