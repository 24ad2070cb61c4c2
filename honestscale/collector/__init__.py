"""The collector: finds event files and MLPerf logs (``discover``) and lands them in the store (``Ingester``)."""

from honestscale.collector._sources import NOT_RESULTS, InputError, Source, discover
from honestscale.collector.ingest import FileResult, Ingester, IngestError, Summary

__all__ = [
    "NOT_RESULTS",
    "FileResult",
    "IngestError",
    "Ingester",
    "InputError",
    "Source",
    "Summary",
    "discover",
]
