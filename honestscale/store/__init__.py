"""The DuckDB store: schema by numbered migrations, and typed queries returning polars frames.

``lint`` and ``report`` read the store through :mod:`honestscale.store.queries` only.
"""

from honestscale.store._database import (
    DEFAULT_STORE,
    STORE_ENV,
    StoreBusy,
    StoreError,
    StoreTooNew,
    latest_version,
    migrations,
    open_store,
    resolve_store_path,
)
from honestscale.store._projection import refresh_runs

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "StoreBusy",
    "StoreError",
    "StoreTooNew",
    "latest_version",
    "migrations",
    "open_store",
    "refresh_runs",
    "resolve_store_path",
]
