"""Helpers of the tests of the readers of other tools' logs: their fixtures (``DATA``, written by the tools, see
its README) and the commands a user runs on them, in process (``ingest``, ``runs``, ``lint``), with the store read
back with plain SQL (``query``)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import duckdb

from tests.conftest import REPO, cli

DATA = REPO / "tests" / "data" / "imported"


def run_cli(*args: str) -> tuple[int, str]:
    got = cli(*args)
    return got.returncode, got.stdout + got.stderr


def log_text(path: Path, plain: bool = False) -> str:
    """The log's text; ``plain``: without the colours torchtitan's console prints."""
    text = gzip.decompress(path.read_bytes()).decode()
    return re.sub(r"\x1b\[[0-9;]*m", "", text) if plain else text


def ingest(store: Path, *paths: Path) -> str:
    code, out = run_cli("ingest", *map(str, paths), "--store", str(store), "-v")
    assert code == 0, out
    return out


def runs(store: Path) -> list[dict[str, Any]]:
    code, out = run_cli("runs", "-f", "json", "--store", str(store))
    assert code == 0, out
    runs: list[dict[str, Any]] = json.loads(out)
    return runs


def lint(store: Path, codes: str) -> list[dict[str, Any]]:
    code, out = run_cli("lint", "--select", codes, "-f", "json", "--store", str(store))
    assert code in (0, 1), out
    return [f for f in json.loads(out) if isinstance(f, dict) and f.get("outcome")]


def query(store: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()
