"""The landing's transactions: one per batch, its claim on the store (many writers of a DuckLake store), and what a
file's earlier version and its evidence (profiler steps, energy records) put in the store."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Protocol

import duckdb

from honestscale import exits
from honestscale.collector._native import TYPED_TABLES
from honestscale.collector._sources import Source
from honestscale.errors import HonestscaleError
from honestscale.store import StoreUnwritable, as_store_error, sql_in_list


class Planned(Protocol):
    """What a batch claims of each file's plan: the file, its id, and the bookkeeping the plan was made from."""

    @property
    def source(self) -> Source: ...

    @property
    def file_id(self) -> int: ...

    @property
    def is_new(self) -> bool: ...

    @property
    def seen(self) -> tuple[Any, ...] | None: ...


class IngestError(HonestscaleError):
    """A file could not be written to the store; files before it have landed."""


class IngestLater(IngestError):
    """The store could not take a batch now (its disk full, other writers first every time): retry later."""

    exit_code = exits.TEMPFAIL


class Conflict(Exception):
    """Another writer of a shared (DuckLake) store committed first: this batch was rolled back, to be planned again."""


MAX_ATTEMPTS = 30  # a batch planned again this many times because other writers committed first: then named


def conflicted(exc: BaseException) -> bool:
    return isinstance(exc, Conflict) or (
        isinstance(exc, duckdb.TransactionException) and "conflict" in str(exc).lower()
    )


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection, what: str) -> Iterator[None]:
    """One transaction; a store that cannot be written (full disk, I/O error) ends in an IngestError naming ``what``.

    DuckDB may already have aborted the transaction (or invalidated the whole database, on a failed write to the
    WAL or a failed checkpoint): the rollback is then a no-op, and the store's own error is the one reported.
    """
    con.execute("BEGIN")
    try:
        yield
        con.execute("COMMIT")
    except BaseException as exc:
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if conflicted(exc):
            raise Conflict(str(exc)) from None
        failed = as_store_error(exc)
        if not isinstance(failed, StoreUnwritable):
            raise
        raise IngestLater(
            failed.message,
            f"free space on the store's disk and ingest again: {what} were rolled back whole, files landed "
            "before them are kept, and the rest lands then",
        ) from None


def forget_file(con: duckdb.DuckDBPyConnection, file_id: int) -> set[str]:
    """Remove what an earlier version of a file put in the store; return the runs it touched."""
    runs = {
        r[0]
        for r in con.execute("SELECT DISTINCT run_id FROM events WHERE file_id = ?", [file_id]).fetchall()
    }
    con.execute("DELETE FROM steps WHERE file_id = ?", [file_id])  # a step's only row
    for table in TYPED_TABLES.values():
        if table != "steps":
            con.execute(
                f"DELETE FROM {table} USING nonstep_events e WHERE e.file_id = ? AND {table}.run_id = e.run_id "
                f"AND {table}.rank = e.rank AND {table}.seq = e.seq",
                [file_id],
            )
    con.execute("DELETE FROM nonstep_events WHERE file_id = ?", [file_id])
    con.execute("DELETE FROM markers WHERE file_id = ?", [file_id])
    con.execute("DELETE FROM quarantine WHERE file_id = ?", [file_id])
    con.execute("DELETE FROM profile_steps WHERE file_id = ?", [file_id])
    con.execute("DELETE FROM energy_records WHERE file_id = ?", [file_id])
    if runs:
        # Rare path (a file rewritten in place, or --force): recount those runs from their events.
        literal = sql_in_list(sorted(runs))
        con.execute(f"DELETE FROM run_ranks WHERE run_id IN {literal}")
        con.execute(
            "INSERT INTO run_ranks SELECT run_id, rank, count(*), min(seq), max(seq), min(time), max(time), "
            f"any_value(file_id) FROM events WHERE run_id IN {literal} GROUP BY run_id, rank"
        )
    return runs


def land_profile(con: duckdb.DuckDBPyConnection, file_id: int, profile: dict[str, Any]) -> None:
    """A profiler trace's steps, as evidence beside a run (what the file gave before: gone with forget_file)."""
    con.executemany(
        "INSERT INTO profile_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [[file_id, profile["run_id"], profile["rank"], profile["world_size"], profile["backend"], profile["device"],
          s["step"], s["t_step"], s["t_busy"], s["t_idle"], s["t_comm"], s["t_comm_exposed"],
          json.dumps(s["comm_by_kind"])] for s in profile["steps"]],
    )  # fmt: skip


def land_energy(con: duckdb.DuckDBPyConnection, file_id: int, records: list[dict[str, Any]]) -> None:
    """Energy records (CodeCarbon rows, sacct lines): what the file gave before is gone with forget_file."""
    con.executemany(
        "INSERT INTO energy_records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [[file_id, r["line"], r["format"], r["job_id"], r["step_id"], r["host"], r["nodes"], r["started_at"],
          r["stopped_at"], r["energy_j"], r["method"], r["state"], json.dumps(r["details"])] for r in records],
    )  # fmt: skip


def next_file_id(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM ingested_files").fetchall()[0][0])


def claim(con: duckdb.DuckDBPyConnection, plans: Sequence[Planned]) -> None:
    """The batch's claim on the store, first in its transaction: the one row every ingest updates (two writers
    whose transactions overlap conflict at commit), and the bookkeeping the plans were made from, unchanged
    (a writer that committed before this transaction began may have landed one of these files, or taken a new
    file id); else ``Conflict``, and the batch is planned again."""
    con.execute("UPDATE store_writes SET n = n + 1")
    rows = con.execute(
        "SELECT path, file_id, bytes_ingested, content_hash FROM ingested_files "
        "WHERE path IN (SELECT unnest(?::VARCHAR[])) OR file_id IN (SELECT unnest(?::INTEGER[]))",
        [[p.source.key for p in plans], [p.file_id for p in plans if p.is_new]],
    ).fetchall()
    now = {str(r[0]): (int(r[1]), r[2], r[3]) for r in rows}
    for plan in plans:
        if now.get(plan.source.key) != plan.seen:
            raise Conflict(f"{plan.source.path} was landed by another writer meanwhile")
    if len(now) > sum(1 for p in plans if not p.is_new):
        raise Conflict("a new file id was taken by another writer meanwhile")


def landed_readers(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str | None]]:
    """Every file another tool wrote (not an event file) in the store: its path, format and the reader that landed
    it ("<format>@<version>"; NULL before readers were versioned)."""
    rows = con.execute(
        "SELECT path, format, reader FROM ingested_files WHERE format NOT IN ('native', 'horovod-timeline') "
        "ORDER BY path"
    ).fetchall()
    return [(str(p), str(f), r) for p, f, r in rows]
