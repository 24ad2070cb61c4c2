"""Thin training runners and the instrumentation they share.

Standard library only at import time: ``honestscale.events`` is imported by
runners inside framework environments (an MXNet venv with an old NumPy, an NGC
container) where DuckDB, polars and the rest are not installed.
"""
