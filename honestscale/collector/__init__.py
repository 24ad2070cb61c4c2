"""The collector: finds event files and MLPerf logs (``discover``) and lands them in the store (``Ingester``)."""

from honestscale.collector._landing import IngestError
from honestscale.collector._read import stale
from honestscale.collector._sources import NOT_RESULTS, InputError, Source, discover
from honestscale.collector._summary import FileResult, Summary
from honestscale.collector.ingest import Ingester
from honestscale.store import interrupted  # Ctrl-C, also where DuckDB reports it as its own error

__all__ = [
    "NOT_RESULTS",
    "FileResult",
    "IngestError",
    "Ingester",
    "InputError",
    "Source",
    "Summary",
    "discover",
    "interrupted",
    "stale",
]
