"""The DuckDB store: schema by numbered migrations, and typed queries returning polars frames.

``lint`` and ``report`` read the store through :mod:`honestscale.store.queries` only.
"""

import duckdb

from honestscale.store import campaigns
from honestscale.store._copy import copy as copy_store
from honestscale.store._database import (
    DEFAULT_STORE,
    STORE_ENV,
    CatalogGone,
    Connection,
    NoSuchCampaign,
    StoreBusy,
    StoreError,
    StoreTooNew,
    StoreUnwritable,
    as_store_error,
    cursor,
    interrupted,
    latest_version,
    migrations,
    open_store,
    ready_for_arrow,
    resolve_store_path,
)
from honestscale.store._lake import DATA_PATH_ENV, Loose, hidden, is_lake, loose_files, shown
from honestscale.store._projection import refresh_runs
from honestscale.store._sql import sql_in_list, sql_string

DUCKDB_VERSION: str = duckdb.__version__

__all__ = [
    "DATA_PATH_ENV",
    "DEFAULT_STORE",
    "DUCKDB_VERSION",
    "STORE_ENV",
    "CatalogGone",
    "Connection",
    "Loose",
    "NoSuchCampaign",
    "StoreBusy",
    "StoreError",
    "StoreTooNew",
    "StoreUnwritable",
    "as_store_error",
    "campaigns",
    "copy_store",
    "cursor",
    "hidden",
    "interrupted",
    "is_lake",
    "latest_version",
    "loose_files",
    "migrations",
    "open_store",
    "ready_for_arrow",
    "refresh_runs",
    "resolve_store_path",
    "shown",
    "sql_in_list",
    "sql_string",
]
