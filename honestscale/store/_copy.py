"""``honestscale store copy SRC DST``: every table of one store into a new one, across the tiers (a DuckDB file
into a DuckLake store and back), checked row for row after the copy."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from honestscale.store import _lake
from honestscale.store._database import StoreError, latest_version, open_store

SOURCE = "copy_source"
# the one row every ingest updates (a DuckLake store's writers conflict on it): each store keeps its own
_OWN = {"schema_version", "store_writes"}


@dataclass(frozen=True)
class Copied:
    table: str
    rows: int


def _tables(con: duckdb.DuckDBPyConnection, catalog: str) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? AND table_schema = 'main' "
        "AND table_type = 'BASE TABLE' ORDER BY table_name",
        [catalog],
    ).fetchall()
    return [str(r[0]) for r in rows]


def _fingerprint(con: duckdb.DuckDBPyConnection, table: str) -> tuple[int, int]:
    """Rows and an order-free hash of them (their text: JSON and floats compare as written)."""
    row = con.execute(
        f"SELECT count(*), coalesce(bit_xor(hash(CAST(t AS VARCHAR))), 0) FROM {table} t"
    ).fetchall()[0]
    return int(row[0]), int(row[1])


def copy(source: str, target: str) -> list[Copied]:
    """Every table of ``source`` into ``target`` (created at this version's schema, or empty), in one transaction;
    then each table's rows and hash compared. Raises StoreError when the source is not at this version's schema,
    the target already holds results, or the copy differs."""
    open_store(
        source, read_only=True
    ).close()  # a missing store, or one of another schema version: its own words
    con = open_store(target, read_only=False)
    try:
        held = con.execute("SELECT count(*) FROM ingested_files").fetchall()[0][0]
        if held:
            raise StoreError(f"{_lake.shown(target)} already holds {held} ingested files",
                             "copy into a new store (a new file, or a new catalog database with --data-path)")  # fmt: skip
        if _lake.is_lake(source):
            _lake.load(con)
            con.execute(
                f"ATTACH '{_lake.quoted(source)}' AS {SOURCE} (READ_ONLY, CREATE_IF_NOT_EXISTS false)"
            )
        else:
            con.execute(f"ATTACH '{_lake.quoted(source)}' AS {SOURCE} (READ_ONLY)")
        catalog = con.execute("SELECT current_database()").fetchall()[0][0]
        tables = [t for t in _tables(con, SOURCE) if t not in _OWN]
        missing = sorted(set(tables) - set(_tables(con, catalog)))
        if missing:
            raise StoreError(f"tables {missing} of {_lake.shown(source)} are not in a store of schema version "
                             f"{latest_version()}", "upgrade honestscale, or migrate the source first")  # fmt: skip
        con.execute("BEGIN")
        try:
            for table in tables:
                columns = ", ".join(
                    f'"{c[0]}"' for c in con.execute(f"DESCRIBE {SOURCE}.main.{table}").fetchall()
                )
                con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {SOURCE}.main.{table}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        copied = []
        for table in tables:
            got, want = _fingerprint(con, table), _fingerprint(con, f"{SOURCE}.main.{table}")
            if got != want:
                raise StoreError(f"the copy of table {table} differs from the source ({got[0]} rows vs {want[0]})",
                                 "report it with both stores; the source is unchanged")  # fmt: skip
            copied.append(Copied(table, got[0]))
        con.execute(f"DETACH {SOURCE}")
        return copied
    finally:
        con.close()
