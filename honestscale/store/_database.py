"""Opening the DuckDB store: locking, numbered migrations, refusing a store from the future."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb

from honestscale import exits
from honestscale.errors import HonestscaleError
from honestscale.store import _lake

# The store's connection type, for every module that reads or writes the store through store/.
Connection = duckdb.DuckDBPyConnection

DEFAULT_STORE = "honestscale.duckdb"
STORE_ENV = "HONESTSCALE_STORE"


class StoreError(HonestscaleError):
    """The store cannot be opened or used."""


class StoreBusy(StoreError):
    """Another process holds the store's write lock (past --wait): retry later."""

    exit_code = exits.TEMPFAIL


class StoreUnwritable(StoreError):
    """A write to the store failed (a full disk, an I/O error); what was committed before stays: retry later."""

    exit_code = exits.TEMPFAIL


class NoSuchCampaign(StoreError):
    """The store holds no campaign of that name (a 404 to serve, never a failure of the store)."""


class CatalogGone(StoreError):
    """A DuckLake store's PostgreSQL catalog went away (or cannot be reached); what was committed before stays."""

    exit_code = exits.TEMPFAIL


class StoreTooNew(StoreError):
    """The store was written by a newer honestscale."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def migrations() -> list[Migration]:
    """The numbered migrations shipped in ``honestscale/store/migrations``, in order."""
    found = []
    for entry in resources.files("honestscale.store").joinpath("migrations").iterdir():
        m = _MIGRATION_NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"store migrations must be numbered 1..n without gaps, found {versions}")
    return found


def latest_version() -> int:
    return migrations()[-1].version


def resolve_store_path(path: str | os.PathLike[str] | None) -> Path:
    """``--store`` if given, else ``$HONESTSCALE_STORE``, else ``./honestscale.duckdb``."""
    if path is None or str(path) == "":
        path = os.environ.get(STORE_ENV) or DEFAULT_STORE
    return Path(path)


_LOCK_PID = re.compile(r"PID (\d+)")
# DuckDB's words for a file cut short (a full disk, a copy interrupted) or with blocks that fail their checksum
# ... for a write that failed: the disk filled up, or an earlier failed write made DuckDB invalidate the database
_UNWRITABLE = re.compile(r"no space left|could not write|invalidated", re.IGNORECASE)
# ... and, in an invalidated database's error, the error that invalidated it (its first line)
_ORIGINAL = re.compile(r'Original error: "([^\n"]+)')
_DAMAGED = re.compile(r"could not read enough bytes|corrupt database file|checksum", re.IGNORECASE)


def interrupted(exc: BaseException) -> bool:
    """Ctrl-C, as Python raises it or as DuckDB reports the query it stopped ("Query interrupted")."""
    if isinstance(exc, KeyboardInterrupt | duckdb.InterruptException):
        return True
    return isinstance(exc, RuntimeError | duckdb.Error) and "interrupted" in str(exc).lower()


def as_store_error(exc: BaseException) -> StoreError | None:
    """A DuckDB error raised while a command used the store, as a message with its fix; None for anything else.

    Opening the store already names a damaged or locked file; this covers what DuckDB finds later: a block that
    fails its checksum, a disk that fills up mid-write (DuckDB then invalidates the connection).
    """
    if not isinstance(exc, duckdb.Error):
        return None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    first = _ORIGINAL.search(str(exc))
    if first:  # "database has been invalidated" says only that an earlier error did it: name that one
        text += f" (its first error: {first.group(1).strip()})"
    if _UNWRITABLE.search(str(exc)):
        return StoreUnwritable(f"the store could not be written: {text}",
                          "free space on the store's disk and run the same command again: what landed before "
                          "stays (every file lands in one transaction), the rest lands then")  # fmt: skip
    if (lost := _lake.gone(str(exc))) is not None:
        return CatalogGone(*lost)
    denied = re.search(r"permission denied[^\n\"]*", str(exc))
    if denied:
        return StoreError(f"the store's catalog refused the write: {denied.group(0)} (a read-only role?)",
                          "ingest, migrate and campaigns need the writer's role; a read-only role serves serve, runs, "
                          "lint, report and compare; nothing was written")  # fmt: skip
    if _DAMAGED.search(str(exc)):
        return StoreError(f"the store is damaged: DuckDB cannot read it ({text})",
                          "move the store file aside and ingest the event files again into a new store: the "
                          "event files are the record, and the store is rebuilt from them")  # fmt: skip
    return StoreError(
        f"the store failed: {text}", "run the command again; if it repeats, report it with this message"
    )


def _damaged(path: Path, text: str) -> StoreError:
    return StoreError(
        f"store {path} is damaged: DuckDB cannot read it ({text})",
        f"move it aside (mv {path} {path}.damaged) and ingest the event files again into a new store: the event "
        "files are the record, and the store is rebuilt from them",
    )


def _connect(
    path: Path, read_only: bool, wait_s: float, on_wait: Callable[[str], None] | None
) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            text = str(exc)
            if "not a valid duckdb database" in text.lower() and not read_only and _empty(path):
                # zero bytes: a store whose creation was cut short (a full disk, a kill) holds nothing; start it again
                path.unlink(missing_ok=True)
                continue
            if "not a valid duckdb database" in text.lower():
                raise StoreError(
                    f"{path} is not a honestscale store (it is not a DuckDB database file)",
                    "pass --store with a store made by honestscale, or a new path to create one",
                ) from None
            if _DAMAGED.search(text):
                raise _damaged(path, text) from None
            if _UNWRITABLE.search(text):
                raise StoreUnwritable(
                    f"cannot open store {path}: {text}",
                    "free space on its disk and run the same command again",
                ) from None
            if "lock" not in text.lower():
                raise StoreError(
                    f"cannot open store {path}: {text}",
                    "check the path and its permissions, and that the disk is not full",
                ) from None
            pid = _LOCK_PID.search(text)
            holder = f"process {pid.group(1)}" if pid else "another process"
            if time.monotonic() >= deadline:
                raise StoreBusy(
                    f"store {path} is in use by {holder} (another command: an ingest or --watch writing it, "
                    "or a report or lint reading it)",
                    f"wait for it to finish, or pass --wait SECONDS to wait longer (waited {wait_s:g} s); "
                    "nothing was written",
                ) from None
            if on_wait is not None and not told:
                on_wait(f"store {path} is in use by {holder}; waiting up to {wait_s:g} s ...")
                told = True
            time.sleep(0.2)
        except duckdb.Error as exc:
            if _DAMAGED.search(str(exc)):
                raise _damaged(path, str(exc)) from None
            raise StoreError(
                f"{path} is not a honestscale store (DuckDB could not open it: {exc})",
                "pass --store with the path of a store made by honestscale, or a new path to create one",
            ) from None


def cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Another connection to the same store (a reader thread's): in the store's catalog, as ``con`` is (a DuckLake
    store is attached to an in-memory session, and ``USE`` is per connection)."""
    catalog = con.execute("SELECT current_database()").fetchall()[0][0]
    other = con.cursor()
    other.execute(f'USE "{catalog}"')
    return other


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _current_version(con: duckdb.DuckDBPyConnection) -> int:
    # the store's own catalog only: a DuckLake session also sees its catalog's metadata tables
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version' "
        "AND table_catalog = current_database()"
    ).fetchall()[0]
    if not exists or exists[0] == 0:
        tables = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database()"
        ).fetchall()[0]
        return 0 if not tables or tables[0] == 0 else -1
    row = con.execute("SELECT max(version) FROM schema_version").fetchall()[0]
    return int(row[0]) if row and row[0] is not None else 0


def ready_for_arrow() -> None:
    """Import here what DuckDB imports by itself once the ingest hands it Arrow tables and bound parameters
    (``pyarrow.dataset``, and with it pandas where pandas is installed): call it before the store opens. Here Ctrl-C is
    an ordinary KeyboardInterrupt; inside DuckDB it would become an error of the store, and an import it cut short
    leaves pandas half made for the next one ("the store failed: ... partially initialized module 'pandas'", seen
    in a test that presses Ctrl-C while an ingest starts)."""
    import pyarrow.dataset  # noqa: F401


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = False,
    wait_s: float = 10.0,
    on_wait: Callable[[str], None] | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open (and, read-write, create or migrate) the store; return the DuckDB connection.

    Read-only opens never create or migrate: a missing store, or one that needs a
    migration, is refused with the command that fixes it. A store whose schema version is
    newer than this honestscale knows is always refused, and left untouched.
    """
    address = (
        str(path) if path is not None and str(path) != "" else os.environ.get(STORE_ENV) or DEFAULT_STORE
    )
    if _lake.is_lake(address):
        return _open_lake(address, read_only)
    store = resolve_store_path(path)
    if read_only and not store.exists():
        raise StoreError(
            f"no store at {store}",
            "ingest event files first (honestscale ingest PATH), or pass --store / set HONESTSCALE_STORE",
        )
    if not read_only and store.parent and not store.parent.exists():
        raise StoreError(
            f"folder {store.parent} of store {store} does not exist", "create it, or pick another --store"
        )
    created = not read_only and (not store.exists() or _empty(store))
    con = _connect(store, read_only, wait_s, on_wait)
    try:
        current = _current_version(con)
        latest = latest_version()
        if current == -1:
            raise StoreError(
                f"{store} is a DuckDB database but not a honestscale store (it has no schema_version table)",
                "pass --store with a honestscale store, or a new path to create one",
            )
        if current > latest:
            raise StoreTooNew(
                f"store {store} has schema version {current}, newer than this honestscale knows ({latest})",
                "upgrade honestscale (pip install -U honestscale); the store was not changed",
            )
        if current < latest:
            if read_only:
                raise StoreError(
                    f"store {store} has schema version {current}; this honestscale needs {latest}",
                    "run `honestscale migrate` once to upgrade it",
                )
            _migrate(con, current)
    except BaseException as exc:
        with suppress(duckdb.Error):
            con.close()
        failed = as_store_error(exc)
        if isinstance(failed, StoreUnwritable):
            raise StoreUnwritable(
                f"store {store} could not be {'created' if created else 'upgraded'}: "
                + failed.message.removeprefix("the store could not be written: "),
                "free space on its disk and run the same command again"
                + (
                    ""
                    if created
                    else "; every migration that finished is kept (each is whole or not at all), the rest runs then"
                ),
            ) from None
        raise
    return con


def _open_lake(address: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A DuckLake store: attached in an in-memory session; created or migrated when opened to write."""
    try:
        con = _lake.connect(
            address, read_only=read_only, data_path=None if read_only else os.environ.get(_lake.DATA_PATH_ENV)
        )
    except _lake.LakeError as exc:
        raise (CatalogGone if exc.unavailable else StoreError)(exc.message, exc.fix) from None
    where = _lake.shown(address)
    try:
        current, latest = _current_version(con), latest_version()
        if current == -1:
            raise StoreError(f"the DuckLake store {where} holds tables but no schema_version: not a honestscale store",
                             "pass --store with a honestscale store, or a new catalog database")  # fmt: skip
        if current > latest:
            raise StoreTooNew(f"store {where} has schema version {current}, newer than this honestscale knows ({latest})",
                              "upgrade honestscale (pip install -U honestscale); the store was not changed")  # fmt: skip
        if current < latest:
            if read_only:
                raise StoreError(
                    f"the DuckLake store {where} has schema version {current}; this honestscale needs {latest}",
                    f"run `honestscale migrate --store '{where}'` once (--data-path FOLDER when it is new)",
                )
            _migrate_lake(con, current)
    except BaseException:
        with suppress(duckdb.Error):
            con.close()
        raise
    return con


_SCHEMA_VERSION = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    "version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
)


# statement types that change rows, by name (the stubs of DuckDB 1.4.4 name the enum's members otherwise)
_CHANGES_ROWS = ("UPDATE", "DELETE")


def _migrate_lake(con: duckdb.DuckDBPyConnection, current: int) -> None:
    """A DuckLake store's migrations. An existing store statement by statement (DuckLake 1.4.4 aborts a transaction
    that adds a column and then updates it), each migration's version recorded after its last statement.

    A new store in few transactions (each statement alone is a commit to the catalog, ~10 ms: 0.7 s for a new
    store, most of a first small ingest): its tables and version rows, then the migrations' updates and deletes, in
    their order. Its tables hold no rows but the ones its migrations insert (no update or delete touches those), so
    an update run after every table is made changes what it would have changed in place: nothing (a test compares
    the result with a lake migrated a version at a time). A table dropped (migration 15's events, a view since)
    commits what came before it: DuckLake 1.4.4 fails a transaction that makes a table, a view over it and drops a
    table ("Table with name ... does not exist")."""
    new = current == 0
    changes: list[duckdb.Statement] = []  # a new store's updates and deletes, run in a last transaction
    if new:
        con.execute("BEGIN")
    con.execute(_lake.lake_sql(_SCHEMA_VERSION))
    for mig in migrations():
        if mig.version <= current:
            continue
        for statement in con.extract_statements(_lake.lake_sql(mig.sql)):
            if new and statement.type.name in _CHANGES_ROWS:
                changes.append(statement)
                continue
            if new and statement.type.name == "DROP":
                con.execute("COMMIT")
                con.execute("BEGIN")
            con.execute(statement)
        con.execute("INSERT INTO schema_version VALUES (?, ?, current_timestamp)", [mig.version, mig.name])
    if new:
        con.execute("COMMIT")
        con.execute("BEGIN")
        for statement in changes:
            con.execute(statement)
        con.execute("COMMIT")


def _migrate(con: duckdb.DuckDBPyConnection, current: int) -> None:
    """A new store in one transaction (made whole or not at all); an existing one a migration per transaction, each
    with its version row (DuckDB 1.4 refuses one transaction that alters a table holding rows, updates it and alters
    it again), so a failure leaves it at the last whole migration."""
    pending = [mig for mig in migrations() if mig.version > current]
    steps = [pending] if current == 0 else [[mig] for mig in pending]
    for step in steps:
        con.execute("BEGIN")
        try:
            con.execute(_SCHEMA_VERSION)
            for mig in step:
                con.execute(mig.sql)
                con.execute(
                    "INSERT INTO schema_version VALUES (?, ?, current_timestamp)", [mig.version, mig.name]
                )
            con.execute("COMMIT")
        except BaseException:
            with suppress(duckdb.Error):  # DuckDB may have aborted it already (a failed write)
                con.execute("ROLLBACK")
            raise
