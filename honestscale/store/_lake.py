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
from pathlib import Path

import duckdb

PREFIX = "ducklake:"
DATA_PATH_ENV = "HONESTSCALE_DATA_PATH"
CATALOG = "honestscale_lake"
_PACKAGES = {"ducklake": "duckdb-ext-ducklake", "postgres": "duckdb-ext-postgres"}
_SECRET = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


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
    con = duckdb.connect()
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
    except LakeError:
        con.close()
        raise
    except duckdb.Error as exc:
        con.close()
        raise LakeError(*_explain(address, str(exc), data_path)) from None
    return con


class LakeError(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message, self.fix = message, fix


def quoted(text: str) -> str:
    return text.replace("'", "''")


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
    if "connection refused" in low or "could not connect" in low or "could not translate host" in low:
        return (f"cannot reach the PostgreSQL of {where}: {first}",
                "check host, port and dbname in the address, and that the server is up (pg_isready)")  # fmt: skip
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
