"""The centre's store: DuckLake with a PostgreSQL catalog (``--store ducklake:postgres:<libpq connection string>``).

DuckDB attaches the lake in an in-memory session (the ``ducklake`` and ``postgres`` extensions come from the
``duckdb-ext-*`` wheels, never downloaded); the tables' Parquet files live under the lake's data path (a folder
every node can reach), given once when the store is created (``--data-path`` / ``HONESTSCALE_DATA_PATH``) and
kept in the catalog after that. PostgreSQL serves many writers and readers at once: no file lock, no waiting.

DuckLake has no PRIMARY KEY, UNIQUE or non-literal DEFAULT: the migrations run with those clauses taken out
(``lake_sql``); the store's writers keep the keys themselves (ingest decides per event whether it is new, a
duplicate or a conflict). The password stays out of sight: libpq reads it from ``PGPASSWORD``, ``~/.pgpass`` or a
service file, and an address that holds one is never printed (``shown``).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

PREFIX = "ducklake:"
DATA_PATH_ENV = "HONESTSCALE_DATA_PATH"
CATALOG = "honestscale_lake"
_PACKAGES = {"ducklake": "duckdb-ext-ducklake", "postgres": "duckdb-ext-postgres"}
_SECRET = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)
# what libpq and DuckDB's postgres extension say when the catalog's server goes away mid-command, or is not there
_GONE = re.compile(
    r"server closed the connection unexpectedly|no connection to the server|terminating connection|"
    r"could not receive data from server|SSL SYSCALL error|Connection refused|could not connect to server",
    re.IGNORECASE,
)
_OPENED: list[
    str
] = []  # the lake addresses this process attached: the last one is what a later failure names


def is_lake(address: str | os.PathLike[str]) -> bool:
    return str(address).startswith(PREFIX)


def shown(text: str) -> str:
    """``text`` with any ``password=...`` of a connection string masked: what may be printed."""
    return _SECRET.sub(r"\1***", text)


def extension_directory() -> Path | None:
    """The extension folder of the ``duckdb-ext-*`` wheels (``duckdb_ext/extensions``), or None when either is
    not installed."""
    found = None
    for package in _PACKAGES.values():
        try:
            files = importlib.metadata.files(package) or []
        except importlib.metadata.PackageNotFoundError:
            return None
        ext = next((f for f in files if str(f).endswith(".duckdb_extension")), None)
        if ext is None:
            return None
        found = Path(str(ext.locate())).parents[
            2
        ]  # .../duckdb_ext/extensions/v1.4.4/<platform>/x.duckdb_extension
    return found


def lake_sql(sql: str) -> str:
    """A migration's SQL for DuckLake: PRIMARY KEY and UNIQUE clauses and non-literal defaults taken out."""
    sql = re.sub(r",\s*PRIMARY KEY\s*\([^)]*\)", "", sql, flags=re.IGNORECASE)
    sql = re.sub(r"\s+PRIMARY KEY\b", "", sql, flags=re.IGNORECASE)
    sql = re.sub(r"\s+UNIQUE\b", "", sql, flags=re.IGNORECASE)
    return re.sub(r"\s+DEFAULT\s+current_timestamp\b", "", sql, flags=re.IGNORECASE)


def load(con: duckdb.DuckDBPyConnection) -> None:
    """The ducklake and postgres extensions, from the wheels' folder, never downloaded."""
    ext = extension_directory()
    if ext is None:
        raise LakeError(
            "the DuckLake store needs the ducklake and postgres extensions, which are not installed",
            "pip install 'honestscale[centre]' (the duckdb-ext-ducklake and duckdb-ext-postgres wheels of DuckDB 1.4.4)",
        )
    con.execute(f"SET extension_directory = '{quoted(str(ext))}'")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("LOAD ducklake")
    con.execute("LOAD postgres")


def connect(address: str, *, read_only: bool, data_path: str | None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB session with the lake attached as the default catalog. Raises ``LakeError`` with what
    to do (the address shown without its password)."""
    # The extensions' signatures are not checked again at every command: DuckDB hashes each 50 MB file before
    # loading it (0.3 s and 0.55 CPU-s for the two, a third of a short command's time on a lake). They come from
    # the pinned duckdb-ext-* wheels, installed by pip into the same site-packages as this code (which nothing
    # signs either), and are never downloaded; whoever can replace them can replace honestscale itself. No SQL of a
    # user's reaches this session (every statement is honestscale's own), so no other file is loaded through it.
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    try:
        load(con)
        options = ["READ_ONLY"] if read_only else []
        if data_path:
            options.append(f"DATA_PATH '{quoted(data_path)}'")
        else:  # a new lake is made only with its data path: DuckLake would pick one of its own
            options.append("CREATE_IF_NOT_EXISTS false")
        attach = f"ATTACH '{quoted(address)}' AS {CATALOG}" + (f" ({', '.join(options)})" if options else "")
        con.execute(attach)
        con.execute(f"USE {CATALOG}")
        if not _OPENED or _OPENED[-1] != address:  # serve reopens its session: one entry, not one a reopen
            _OPENED.append(address)
    except LakeError:
        con.close()
        raise
    except duckdb.Error as exc:
        con.close()
        raise LakeError(
            *_explain(address, str(exc), data_path), unavailable=bool(_GONE.search(str(exc)))
        ) from None
    return con


class LakeError(Exception):
    def __init__(self, message: str, fix: str, *, unavailable: bool = False) -> None:
        super().__init__(message)
        self.message, self.fix = message, fix
        self.unavailable = (
            unavailable  # the catalog's server cannot be reached now: retry later (exits.TEMPFAIL)
        )


def quoted(text: str) -> str:
    return text.replace("'", "''")


def hidden(text: str, *addresses: str) -> str:
    """``text`` for a web page: every lake address (``addresses`` and those this process attached), whole or its
    libpq part, replaced by "the store's catalog"; a password masked as ``shown`` does."""
    for address in sorted({*addresses, *_OPENED}, key=len, reverse=True):
        if is_lake(address):
            libpq = address.split(":", 2)[-1]
            for form in (address, shown(address), libpq, shown(libpq)):
                text = text.replace(form, "the store's catalog")
    return shown(text)


def endpoint(address: str) -> tuple[str, str]:
    """The catalog server's host (or socket folder) and port in a libpq connection string, with libpq's defaults."""

    def part(key: str, env: str, default: str) -> str:
        m = re.search(rf"\b{key}\s*=\s*('[^']*'|\S+)", address)
        return m.group(1).strip("'") if m else os.environ.get(env) or default

    return part("host", "PGHOST", "localhost"), part("port", "PGPORT", "5432")


def gone(text: str, address: str | None = None) -> tuple[str, str] | None:
    """(message, fix) when ``text`` (a DuckDB error) says the catalog's PostgreSQL went away or cannot be reached;
    None otherwise. Named by host and port only (``address``, else the lake this process attached last)."""
    said = _GONE.search(text)
    if said is None:
        return None
    address = address or (_OPENED[-1] if _OPENED else None)
    host, port = endpoint(address) if address else ("?", "?")
    return (
        f"the catalog's PostgreSQL at {host}:{port} went away: {said.group(0).lower()}",
        f"start it again (pg_isready -h {host} -p {port} says when it answers) and run the same command again: "
        "what landed before is whole (each file lands in one transaction or not at all), the rest lands then; "
        "`honestscale store check` lists the Parquet files a write cut short left behind",
    )


def _explain(address: str, text: str, data_path: str | None) -> tuple[str, str]:
    where = shown(address)
    first = shown(text.strip().splitlines()[0] if text.strip() else text)
    if "creating a new DuckLake is explicitly disabled" in text:
        return (f"no honestscale store at {where} yet (its catalog database holds no DuckLake)",
                f"create it once: honestscale --store '{where}' --data-path FOLDER migrate (FOLDER: where its "
                f"Parquet files go, a folder every node can reach; or {DATA_PATH_ENV})")  # fmt: skip
    if "DATA_PATH" in text and "does not match" in text:
        return (f"the DuckLake store {where} keeps its data elsewhere than --data-path {data_path}",
                "leave --data-path out (the catalog keeps the data path it was created with)")  # fmt: skip
    low = text.lower()
    # a file of the wheels cut short or overwritten (no signature is checked, see connect; DuckDB reads its metadata)
    if broken := re.search(r"Failed to load '(ducklake|postgres)'", text):
        package = _PACKAGES[broken.group(1)]
        return (
            f"the {broken.group(1)} extension of the {package} wheel cannot be loaded: {first}",
            f"install the wheel again: pip install --force-reinstall --no-deps '{package}=={duckdb.__version__}.*'",
        )
    if "connection refused" in low or "could not connect" in low or "could not translate host" in low:
        host, port = endpoint(address)
        return (
            f"cannot reach the catalog's PostgreSQL at {host}:{port} (store {where}): connection refused",
            f"check host, port and dbname in the address, and that the server is up (pg_isready -h {host} -p "
            f"{port})",
        )
    if re.search(r'database "[^"]*" does not exist', text):
        return (f"the catalog database of {where} does not exist: {first}",
                "create it first (createdb NAME, as a PostgreSQL user allowed to), then: honestscale --store ADDRESS "
                "--data-path FOLDER migrate")  # fmt: skip
    if "permission denied" in low:
        return (f"PostgreSQL refused {where} what it asked: {first}",
                "a read-only role serves `serve`, `runs`, `lint` and `report` (GRANT SELECT on the catalog's "
                "tables); ingest and migrate need the writer's role")  # fmt: skip
    if "authentication failed" in low or "no password supplied" in low:
        return (f"PostgreSQL refused the login to {where}: {first}",
                "give the password in PGPASSWORD, ~/.pgpass or a service file (PGSERVICE), never in --store")  # fmt: skip
    if "data_path" in text.lower() or "data path" in text.lower():
        return (f"the DuckLake store {where} has no data path yet: {first}",
                f"create it with --data-path FOLDER (or {DATA_PATH_ENV}): a folder every node can reach, for its "
                "Parquet files")  # fmt: skip
    return (f"cannot open the DuckLake store {where}: {first}",
            "check the address (ducklake:postgres:dbname=... host=... user=...) and the server")  # fmt: skip


@dataclass(frozen=True)
class Loose:
    """The Parquet files of a lake's data path that hold nothing the store shows."""

    orphaned: list[str]  # named by no catalog row: a writer killed or cut off mid-write left them
    expired: list[str]  # dropped by the catalog (a deletion, an expired snapshot) and scheduled for removal

    @property
    def count(self) -> int:
        return len(self.orphaned) + len(self.expired)


def loose_files(con: duckdb.DuckDBPyConnection, older_than_s: float, remove: bool) -> Loose:
    """The lake's loose files, found (and with ``remove``, deleted) by DuckLake's own cleanup functions
    (``ducklake_delete_orphaned_files``, ``ducklake_cleanup_old_files``); only those older than ``older_than_s``
    seconds (0: all), so that the files of a writer still running are never taken."""
    since = (
        f"older_than => now() - INTERVAL {int(older_than_s)} SECOND"
        if older_than_s > 0
        else "cleanup_all => true"
    )
    dry = "false" if remove else "true"
    got = [
        [
            str(path)
            for (path,) in con.execute(f"CALL {fn}('{CATALOG}', dry_run => {dry}, {since})").fetchall()
        ]
        for fn in ("ducklake_delete_orphaned_files", "ducklake_cleanup_old_files")
    ]
    return Loose(*got)
