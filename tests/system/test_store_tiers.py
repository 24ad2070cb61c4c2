"""The same commands on the two tiers of the store: a DuckDB file and a DuckLake with a PostgreSQL catalog give the
same results (issue 41). In process (typer's CliRunner) against a throwaway PostgreSQL (tests/postgres.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from honestscale.store import open_store
from tests.conftest import COMPARE_RUNS, cli
from tests.postgres import Postgres


def _cli(store: str, *args: str) -> tuple[int, str]:
    """The command on a store, in process (conftest's ``cli``: main()'s messages and exit codes); what it printed."""
    got = cli("--store", store, *args, env={"HONESTSCALE_DATA_PATH": None})
    return got.returncode, got.stdout + got.stderr


def _flat(out: str) -> str:
    """The output as one line: rich wraps a long line (a long temporary path, say) at the console's width."""
    return " ".join(out.split())


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
    assert code == 0 and "schema version" in _flat(out), out
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
        assert code == 0 and "0 events landed" in _flat(out), out


def test_a_lake_without_its_extensions_or_server_or_data_path_says_what_to_do(
    tmp_path: Path, postgres: Postgres
) -> None:
    secret = "s3cr3t-that-must-not-show"
    new = postgres.create_database("fresh") + f" password={secret}"
    code, out = _cli(new, "migrate")
    assert code != 0 and "--data-path" in _flat(out) and secret not in out, out
    gone = f"ducklake:postgres:dbname=nothing host=127.0.0.1 port=1 user=postgres password={secret}"
    code, out = _cli(gone, "runs")
    assert (
        code == 75  # the catalog cannot be reached now: retry later (exits.TEMPFAIL)
        and "cannot reach the catalog's PostgreSQL at 127.0.0.1:1" in _flat(out)
        and secret not in out
        and "***" in out
    ), out
    empty = postgres.create_database("empty")
    for command in ("runs", "ingest"):
        code, out = _cli(empty, command, *([str(COMPARE_RUNS)] if command == "ingest" else []))
        assert code != 0 and "--data-path FOLDER migrate" in _flat(out), out


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


READER = (
    "CREATE ROLE hs_reader LOGIN PASSWORD 'reader-s3cret'",
    "GRANT CONNECT ON DATABASE live TO hs_reader",
    "GRANT USAGE ON SCHEMA public TO hs_reader",
    "GRANT SELECT ON ALL TABLES IN SCHEMA public TO hs_reader",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO hs_reader",
)


def test_serve_reads_a_lake_as_a_read_only_role_while_campaigns_land(
    tmp_path: Path, postgres: Postgres
) -> None:
    """The dashboard on a DuckLake store, logged in as a role that may only SELECT (its password from PGPASSWORD,
    never shown): a campaign ingested by the writer while it serves appears; the reader role cannot write."""
    from tests.serving import start, stop

    lake = postgres.create_database("live")
    runs = sorted(COMPARE_RUNS.iterdir())
    code, out = _cli(lake, "--data-path", str(tmp_path / "lake-data"), "ingest",
                     *[str(r) for r in runs if r.name.startswith("compare-base-")])  # fmt: skip
    assert code == 0, out
    postgres.sql("live", *READER)
    reader = lake.replace("user=postgres", "user=hs_reader")
    server = start(Path(reader), env={"PGPASSWORD": "reader-s3cret"})
    try:

        def names() -> set[str]:
            return {c["campaign"] for c in json.loads(server.get("/api/campaigns")[1])["campaigns"]}

        assert names() == {"compare-base"}
        code, out = _cli(lake, "ingest", *[str(r) for r in runs if r.name.startswith("compare-loaders-")])
        assert code == 0, out
        deadline = time.monotonic() + 60
        while "compare-loaders" not in names() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert names() == {"compare-base", "compare-loaders"}
        status, page, _ = server.get("/campaigns/compare-loaders")
        assert status == 200 and "reader-s3cret" not in page
    finally:
        err = stop(server)
    assert "reader-s3cret" not in err
    denied = subprocess.run([sys.executable, "-m", "honestscale", "ingest", str(runs[-1])], capture_output=True,
                            text=True, env={**os.environ, "HONESTSCALE_STORE": reader, "PGPASSWORD": "reader-s3cret"},
                            timeout=120)  # fmt: skip
    assert denied.returncode != 0 and "refused the write: permission denied" in denied.stderr, denied.stderr


def test_store_copy_up_to_the_lake_and_back_keeps_every_table(tmp_path: Path, postgres: Postgres) -> None:
    """A file store copied into a new DuckLake store and back into a new file: every table equal to the first,
    row for row (its own hash of each row's text), the schema version the same; a store that holds results is
    never copied into."""
    first, back = str(tmp_path / "a.duckdb"), str(tmp_path / "b.duckdb")
    imported = Path(__file__).parent.parent / "data" / "imported"
    code, out = _cli(
        first, "ingest", str(COMPARE_RUNS), str(imported / "sacct"), str(imported / "kineto-cpu")
    )
    assert code == 0, out
    lake = postgres.create_database("moved")
    code, out = _cli(lake, "--data-path", str(tmp_path / "lake-data"), "store", "copy", first, lake)
    assert code == 0 and "each checked row for row" in _flat(out), out
    code, out = _cli(back, "store", "copy", lake, back)
    assert code == 0, out

    def tables(store: str) -> dict[str, tuple[int, int]]:
        con = open_store(store, read_only=True)
        try:
            names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE "
                                               "table_catalog = current_database() AND table_schema = 'main'").fetchall()]  # fmt: skip
            return {n: con.execute(f"SELECT count(*), coalesce(bit_xor(hash(CAST(t AS VARCHAR))), 0) FROM {n} t")
                    .fetchall()[0] for n in names if n not in ("schema_version", "store_writes")}  # fmt: skip
        finally:
            con.close()

    want = tables(first)
    assert want["events"][0] > 3000 and want["energy_records"][0] == 22 and want["profile_steps"][0] == 6
    assert tables(lake) == want == tables(back)
    assert _json(first, "runs") == _json(back, "runs")
    code, out = _cli(back, "store", "copy", first, back)
    assert code != 0 and "already holds" in _flat(out), out


def test_the_catalog_going_away_is_named_and_a_killed_writer_s_files_are_cleaned(tmp_path: Path) -> None:
    """A private PostgreSQL (the session's serves other tests): stopped under a served store, the campaign page it
    has shown answers 503, never 404, and no page shows the connection string; ingest names the catalog's server by
    host and port. Started again, an ingest killed with SIGKILL mid-write leaves Parquet files no catalog row
    names: `store check` lists them (exit 1), `store clean --older-than 0` removes exactly those, and the store's
    JSON is the same before and after."""
    from tests.postgres import cluster
    from tests.serving import start, stop

    own = cluster()
    pg = next(own)
    try:
        lake, data = pg.create_database("gone"), tmp_path / "lake-data"
        code, out = _cli(lake, "--data-path", str(data), "ingest", str(COMPARE_RUNS))
        assert code == 0, out
        server = start(Path(lake))
        try:
            assert server.get("/campaigns/compare-base")[0] == 200
            pg.pg_ctl("stop", "-m", "fast")
            for path in ("/campaigns/compare-base", "/campaigns", "/runs", "/api/campaigns"):
                status, page, _ = server.get(path)
                assert status == 503 and "dbname=" not in page and "user=postgres" not in page, (
                    path,
                    page[:300],
                )
            code, out = _cli(
                lake, "ingest", str(Path(__file__).parent.parent / "data" / "imported" / "sacct")
            )
            assert code != 0 and f"the catalog's PostgreSQL at 127.0.0.1:{pg.port}" in _flat(out), out
            assert "COPY" not in out and "ducklake_" not in out
            pg.pg_ctl("start", "-w")
        finally:
            stop(server)
        before = _json(lake, "runs")
        orphans = _killed_mid_write(lake, data)
        code, out = _cli(lake, "store", "check", "--older-than", "0")
        listed = {line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("orphaned: ")}
        assert code == 1 and listed and listed <= orphans, out
        assert all(Path(p).is_file() for p in listed)
        code, out = _cli(lake, "store", "clean", "--older-than", "0")
        assert code == 0 and f"removed {len(listed)} loose Parquet file(s)" in _flat(out), out
        assert not any(Path(p).exists() for p in listed)
        code, out = _cli(lake, "store", "check", "--older-than", "0")
        assert code == 0 and "found 0 loose" in _flat(out), out
        after = _json(lake, "runs")
        landed = {r["run_id"] for r in after} - {
            r["run_id"] for r in before
        }  # what the killed ingest committed
        assert _same([r for r in after if r["run_id"] not in landed]) == _same(before)
    finally:
        with contextlib.suppress(StopIteration):
            next(own)


def _killed_mid_write(lake: str, data: Path) -> set[str]:
    """An ingest of the MLPerf rounds killed (SIGKILL) once it has written Parquet files: the files on disk then
    (the orphans are among them). Tried up to three times, for a kill that lands between two transactions."""
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    for attempt in range(3):
        known = {str(p) for p in data.rglob("*.parquet")}
        writer = subprocess.Popen([sys.executable, "-m", "honestscale", "ingest", str(shared)],
                                  env={**os.environ, "HONESTSCALE_STORE": lake}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 120
        while (
            len(list(data.rglob("*.parquet"))) < len(known) + 10 + 10 * attempt
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        new = {str(p) for p in data.rglob("*.parquet")} - known
        con = open_store(lake, read_only=True)
        try:
            named = {str(p) for (p,) in con.execute(
                "CALL ducklake_delete_orphaned_files('honestscale_lake', dry_run => true, cleanup_all => true)"
            ).fetchall()}  # fmt: skip
        finally:
            con.close()
        if named:
            return new
    raise AssertionError("three SIGKILLs each landed between transactions: no orphaned file to clean")


def _layout(con: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A store's tables and columns, its versions and its one seeded row, in order."""
    columns = con.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_catalog = current_database() ORDER BY table_name, ordinal_position"
    ).fetchall()
    versions = con.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
    return columns, versions, con.execute("SELECT * FROM store_writes").fetchall()


def test_a_new_lake_made_at_once_equals_one_migrated_a_version_at_a_time(
    tmp_path: Path, postgres: Postgres
) -> None:
    """A new lake's migrations run in two transactions (its tables and versions, then the updates and deletes): the
    same tables, columns, versions and rows as a lake that had the first version and was migrated statement by
    statement, the path of every existing lake."""
    from honestscale.store import _database, _lake

    new = postgres.create_database("made_at_once")
    code, out = _cli(new, "--data-path", str(tmp_path / "a"), "migrate")
    assert code == 0, out
    old = postgres.create_database("migrated_in_steps")
    con = _lake.connect(old, read_only=False, data_path=str(tmp_path / "b"))
    try:
        first = _database.migrations()[0]
        con.execute(_lake.lake_sql(_database._SCHEMA_VERSION))
        for statement in con.extract_statements(_lake.lake_sql(first.sql)):
            con.execute(statement)
        con.execute(
            "INSERT INTO schema_version VALUES (?, ?, current_timestamp)", [first.version, first.name]
        )
        _database._migrate_lake(con, first.version)
        stepped = _layout(con)
    finally:
        con.close()
    made = open_store(new, read_only=True)
    try:
        assert _layout(made) == stepped
        assert stepped[1][-1][0] == _database.latest_version() and stepped[2] == [(0,)]
    finally:
        made.close()
