"""The store: numbered migrations, a version table, refusal of stores from the future, where it lives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from honestscale.store import StoreError, StoreTooNew, latest_version, migrations, open_store
from tests.conftest import EXAMPLE, cli, counts, query, store_at_version


def test_fresh_store_has_every_table_at_the_latest_version(store: Path) -> None:
    open_store(store).close()
    tables = {r[0] for r in query(store, "SELECT table_name FROM information_schema.tables")}
    assert {"schema_version", "campaigns", "runs", "events", "steps", "epochs", "evals", "system_samples",
            "ingested_files", "ingest_log", "quarantine"} <= tables  # fmt: skip
    assert query(store, "SELECT max(version) FROM schema_version") == [(latest_version(),)]
    assert [m.version for m in migrations()] == list(range(1, latest_version() + 1))


def test_store_from_a_newer_honestscale_is_refused_and_left_alone(store: Path) -> None:
    assert cli("ingest", EXAMPLE, "--store", store).returncode == 0
    con = duckdb.connect(str(store))
    con.execute("INSERT INTO schema_version VALUES (99, 'from_the_future', current_timestamp)")
    con.close()
    before = counts(store)
    with pytest.raises(StoreTooNew, match="schema version 99, newer than this honestscale knows"):
        open_store(store)
    for args in (["ingest", EXAMPLE], ["runs"]):
        result = cli(*args, "--store", store)
        assert result.returncode == 2
        assert "newer than this honestscale knows" in result.stderr and "upgrade honestscale" in result.stderr
    assert counts(store) == before


def test_other_duckdb_files_and_missing_stores_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="not a honestscale store"):
        open_store(other)
    with pytest.raises(StoreError, match="no store at"):
        open_store(tmp_path / "missing.duckdb", read_only=True)
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n")
    result = cli("runs", "--store", text)
    assert result.returncode == 2 and "not a honestscale store" in result.stderr


def test_store_location_default_env_and_option(tmp_path: Path) -> None:
    env_store, opt_store = tmp_path / "env.duckdb", tmp_path / "opt.duckdb"
    assert cli("ingest", EXAMPLE, env={"HONESTSCALE_STORE": str(env_store)}).returncode == 0
    assert counts(env_store)["runs"] == 4
    assert (
        cli("ingest", EXAMPLE, "--store", opt_store, env={"HONESTSCALE_STORE": str(env_store)}).returncode
        == 0
    )
    assert counts(opt_store)["runs"] == 4
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"}
    cmd = [sys.executable, "-m", "honestscale", "ingest", str(EXAMPLE)]
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=env)
    assert counts(cwd / "honestscale.duckdb")["runs"] == 4


# DuckDB 1.4.4's words when the catalog's PostgreSQL stopped under an attached DuckLake (recorded from a real
# session: tests/system/test_store_tiers.py stops one under serve and ingest)
_CLOSED = ('Failed to query most recent snapshot for DuckLake: Failed to execute query "BEGIN TRANSACTION ISOLATION '
           'LEVEL REPEATABLE READ": server closed the connection unexpectedly\n\tThis probably means the server '
           "terminated abnormally\n\tbefore or while processing the request.\n\n\nLINE 2: \tSELECT * FROM "
           "postgres_query('__ducklake_metadata_honestscale_lake',")  # fmt: skip


def test_the_catalog_going_away_mid_command_is_named_by_host_and_port() -> None:
    """What DuckDB says when the catalog's server goes away during a command becomes one sentence naming the
    server by host and port (never DuckDB's internal query, never the connection string) and what to do."""
    from honestscale.store import CatalogGone, _lake, as_store_error

    _lake._OPENED.append("ducklake:postgres:dbname=hs host=db.example.org port=6432 user=hs password=s3cret")
    try:
        got = as_store_error(duckdb.Error(_CLOSED))
    finally:
        _lake._OPENED.pop()
    assert isinstance(got, CatalogGone)
    assert got.message == ("the catalog's PostgreSQL at db.example.org:6432 went away: server closed the "
                           "connection unexpectedly")  # fmt: skip
    assert got.fix is not None and "pg_isready -h db.example.org -p 6432" in got.fix and "whole" in got.fix
    assert "s3cret" not in str(got) and "postgres_query" not in str(got)


def test_an_extension_file_that_cannot_be_loaded_names_its_wheel_and_the_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lake's session loads the extensions without checking their signatures (store/_lake.connect): a file
    cut short or overwritten is still refused by DuckDB (its metadata), and the error names the wheel to install
    again, not the catalog's address."""
    from honestscale.store import _lake

    platform = duckdb.execute("PRAGMA platform").fetchall()[0][0]
    folder = tmp_path / "extensions" / f"v{duckdb.__version__}" / platform
    folder.mkdir(parents=True)
    for name in ("ducklake", "postgres_scanner"):
        (folder / f"{name}.duckdb_extension").write_bytes(b"\x7fELF cut short" * 64)
    monkeypatch.setattr(_lake, "extension_directory", lambda: tmp_path / "extensions")
    with pytest.raises(_lake.LakeError) as refused:
        _lake.connect("ducklake:postgres:dbname=hs host=127.0.0.1 port=1", read_only=True, data_path=None)
    assert refused.value.message.startswith(
        "the ducklake extension of the duckdb-ext-ducklake wheel cannot be loaded"
    )
    assert "pip install --force-reinstall --no-deps 'duckdb-ext-ducklake==1.4.4.*'" in refused.value.fix


def test_a_store_of_schema_14_keeps_every_event_when_its_steps_move_out_of_events(tmp_path: Path) -> None:
    """Migration 15: a step's row in events moves into steps (its file, line, payload and digest), every other
    event into nonstep_events; the view events then reads exactly the rows the table held."""
    store = tmp_path / "s.duckdb"
    rows = [  # run_id, rank, seq, time, kind, file_id, line, payload, digest
        ("r", 0, 0, 1.0, "run_start", 1, 1, '{"kind": "run_start"}', 11),
        ("r", 0, 1, 2.0, "step", 1, 2, None, 12),
        ("r", 0, 2, 3.0, "step", 1, 3, '{"kind": "step", "gpu_temp_c": 71}', 13),
        ("r", 1, 1, 2.5, "step", 2, 2, None, None),  # landed before digests existed
        ("r", 0, 3, 4.0, "epoch", 1, 4, None, 14),
    ]
    with store_at_version(store, 14) as con:
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        con.executemany(
            "INSERT INTO steps (run_id, rank, seq, time, step, samples, t_total) VALUES (?, ?, ?, ?, ?, 64, 0.1)",
            [(r[0], r[1], r[2], r[3], r[2]) for r in rows if r[4] == "step"],
        )
    open_store(store).close()
    assert query(store, "SELECT max(version) FROM schema_version") == [(latest_version(),)]
    assert sorted(query(store, "SELECT * FROM events")) == sorted(rows)
    assert sorted(query(store, "SELECT kind FROM nonstep_events")) == [("epoch",), ("run_start",)]
    assert sorted(
        query(store, "SELECT run_id, rank, seq, time, file_id, line, payload, digest FROM steps")
    ) == sorted((r[0], r[1], r[2], r[3], r[5], r[6], r[7], r[8]) for r in rows if r[4] == "step")


def test_a_store_of_schema_15_learns_each_resumed_runs_pause_from_its_run_stop(tmp_path: Path) -> None:
    """Migration 16: runs.paused_s, filled from the run_stop markers of the runs already stored (contract 6's
    paused_s, which time_to_train_s already left out); a run of one launch keeps NULL."""
    store = tmp_path / "s.duckdb"
    with store_at_version(store, 15) as con:
        con.execute(
            "INSERT INTO runs (run_id, source, status, ranks_seen, ranks_stopped, time_to_train_s) VALUES ('resumed', 'wandb', 'success', 2, 2, 2.8), ('once', 'wandb', 'success', 1, 1, 5.0)"
        )
        con.execute(
            "INSERT INTO markers (run_id, rank, seq, time, kind, file_id, payload) VALUES "
            """('resumed', 0, 9, 7.2, 'run_stop', 1, '{"status": "success", "paused_s": 4.42}'), """
            """('resumed', 1, 9, 7.1, 'run_stop', 1, '{"status": "success", "paused_s": 4.40}'), """
            """('once', 0, 9, 5.0, 'run_stop', 1, '{"status": "success"}')"""
        )
    open_store(store).close()
    assert sorted(query(store, "SELECT run_id, paused_s FROM runs")) == [("once", None), ("resumed", 4.42)]


def test_a_store_of_schema_16_counts_again_a_seeded_repetition_taken_for_a_twin(tmp_path: Path) -> None:
    """Migration 17: of two superseded MLflow runs, the one whose evaluations lie hours after its twin's counts
    again (two trainings with one seed); the one whose evaluations overlap its twin's in time stays superseded, as
    does a Lightning CSV's (its clock is its file's, not compared)."""
    store = tmp_path / "s.duckdb"
    runs = [
        ("sql", "mlflow-sqlite"),
        ("later", "mlflow-files"),
        ("beside", "mlflow-files"),
        ("csv", "lightning-metrics"),
    ]
    evals = {
        "sql": (100.0, 110.0),
        "later": (10_100.0, 10_110.0),
        "beside": (100.5, 110.5),
        "csv": (9e9, 9e9 + 10),
    }
    with store_at_version(store, 16) as con:
        for run_id, source in runs:
            con.execute("INSERT INTO runs (run_id, source, status, ranks_seen, ranks_stopped) "
                        "VALUES (?, ?, 'success', 1, 1)", [run_id, source])  # fmt: skip
            for seq, t in enumerate(evals[run_id]):
                con.execute("INSERT INTO evals VALUES (?, 0, ?, ?, 'validation', 'loss', ?, NULL, ?)",
                            [run_id, seq, t, 0.5 - 0.1 * seq, seq])  # fmt: skip
        for run_id in ("later", "beside", "csv"):
            con.execute(
                "INSERT INTO superseded_runs VALUES (?, '', ?, current_timestamp)",
                [
                    run_id,
                    "the same training as run sql, read from another log of it (mlflow-sqlite), which ...",
                ],
            )
    open_store(store).close()
    assert sorted(query(store, "SELECT run_id FROM superseded_runs")) == [("beside",), ("csv",)]
