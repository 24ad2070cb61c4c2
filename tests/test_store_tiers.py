"""The same commands on the two tiers of the store: a DuckDB file and a DuckLake with a PostgreSQL catalog give the
same results (issue 41). In process (typer's CliRunner) against a throwaway PostgreSQL (tests/postgres.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from honestscale.cli import app
from honestscale.errors import HonestscaleError
from honestscale.store import open_store
from tests.conftest import COMPARE_RUNS
from tests.postgres import Postgres


def _cli(store: str, *args: str) -> tuple[int, str]:
    # the callback's --store and --data-path set the environment: unset here, restored after each command
    env: dict[str, str | None] = {"COLUMNS": "200", "HONESTSCALE_STORE": None, "HONESTSCALE_DATA_PATH": None}
    result = CliRunner().invoke(app, ["--store", store, *args], env=env)
    if isinstance(result.exception, HonestscaleError):  # what honestscale.cli.main prints, and exits with
        return result.exception.exit_code, f"error: {result.exception.message}\n  fix: {result.exception.fix}"
    return result.exit_code, result.output


def _json(store: str, *args: str) -> Any:
    code, out = _cli(store, *args, "-f", "json")
    assert code in (0, 1), out
    return json.loads(out)


def _same(value: Any) -> Any:
    """The JSON without what names the store itself (its address) or when it was read."""
    if isinstance(value, dict):
        return {k: _same(v) for k, v in value.items() if k not in ("store", "generated_at", "created_at")}
    if isinstance(value, list):
        return [_same(v) for v in value]
    return value


def test_every_command_gives_the_same_results_on_both_tiers(
    tmp_path: Path, postgres: Postgres, mlperf: Path
) -> None:
    lake = postgres.create_database("tiers")
    data = tmp_path / "lake-data"
    file = str(tmp_path / "s.duckdb")
    sources = [str(COMPARE_RUNS), str(mlperf / "DellEMC")]
    code, out = _cli(lake, "--data-path", str(data), "migrate")
    assert code == 0 and "schema version" in out, out
    for store in (file, lake):
        code, out = _cli(store, "ingest", *sources)
        assert code == 0, out
    assert list(data.rglob("*.parquet")), "the lake's tables are Parquet files under its data path"
    for args in (
        ("runs",),
        ("summary",),
        ("lint",),
        ("report", "--campaign", "compare-base", "--path-root", str(tmp_path)),
        ("compare", "compare-base", "compare-loaders"),
        ("advise",),
    ):
        assert _same(_json(file, *args)) == _same(_json(lake, *args)), args
    # a second ingest of the same files adds nothing, on both
    for store in (file, lake):
        code, out = _cli(store, "ingest", *sources)
        assert code == 0 and "0 events landed" in out, out


def test_a_lake_without_its_extensions_or_server_or_data_path_says_what_to_do(
    tmp_path: Path, postgres: Postgres
) -> None:
    secret = "s3cr3t-that-must-not-show"
    new = postgres.create_database("fresh") + f" password={secret}"
    code, out = _cli(new, "migrate")
    assert code != 0 and "--data-path" in out and secret not in out, out
    gone = f"ducklake:postgres:dbname=nothing host=127.0.0.1 port=1 user=postgres password={secret}"
    code, out = _cli(gone, "runs")
    assert code != 0 and "cannot reach the PostgreSQL" in out and secret not in out and "***" in out, out
    empty = postgres.create_database("empty")
    for command in ("runs", "ingest"):
        code, out = _cli(empty, command, *([str(COMPARE_RUNS)] if command == "ingest" else []))
        assert code != 0 and "--data-path FOLDER migrate" in out, out


def test_eight_writers_at_once_and_two_of_the_same_files_land_everything_once(
    tmp_path: Path, postgres: Postgres, mlperf: Path
) -> None:
    """8 ``ingest`` processes of different campaigns and 2 more of the same files, at once, into one DuckLake store:
    the runs equal those of the same files ingested one after another into a DuckDB file; no event twice."""
    lake = postgres.create_database("writers")
    code, out = _cli(lake, "--data-path", str(tmp_path / "lake-data"), "migrate")
    assert code == 0, out
    runs = sorted(COMPARE_RUNS.iterdir())
    by_campaign = [[str(r) for r in runs if r.name.startswith(f"compare-{c}-")]
                   for c in ("base", "loaders", "again", "confounded")]  # fmt: skip
    vendors = [[str(p)] for p in sorted((mlperf / "DellEMC" / "results").iterdir())] + [
        [str(mlperf / "Google")]
    ]
    writers = [*by_campaign, *vendors]
    assert len(writers) == 8 and all(writers)
    writers += [by_campaign[0], by_campaign[0]]  # the same files twice more
    env = {**os.environ, "COLUMNS": "200", "HONESTSCALE_STORE": lake}
    procs = [subprocess.Popen([sys.executable, "-m", "honestscale", "ingest", *paths], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for paths in writers]  # fmt: skip
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), outs
    file = str(tmp_path / "s.duckdb")
    for paths in writers:
        code, out = _cli(file, "ingest", *paths)
        assert code == 0, out
    assert _same(_json(lake, "runs")) == _same(_json(file, "runs"))
    for store in (lake, file):
        got = open_store(store, read_only=True)
        try:
            events, distinct = got.execute(
                "SELECT count(*), count(DISTINCT (run_id, rank, seq)) FROM events"
            ).fetchall()[0]
            files, ids = got.execute(
                "SELECT count(DISTINCT path), count(DISTINCT file_id) FROM ingested_files"
            ).fetchall()[0]
            assert (
                events == distinct
                and files == ids == got.execute("SELECT count(*) FROM ingested_files").fetchall()[0][0]
            )
        finally:
            got.close()
