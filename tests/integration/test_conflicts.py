"""A run id claimed twice: a copy is a duplicate, different content is a conflict, never a silent skip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import EXAMPLE, cli, query, store_at_version

RUN = "digits-mlp-2w-r0-20261121T085353"


def _snapshot(store: Path) -> list[tuple[object, ...]]:
    return query(
        store,
        "SELECT run_id, rank, seq, time, kind, digest FROM events ORDER BY run_id, rank, seq",
    ) + query(store, "SELECT * EXCLUDE (source_file) FROM runs ORDER BY run_id")


def _first_step(path: Path) -> tuple[list[str], int, dict[str, object]]:
    """The file's lines, and the index and event of its first step."""
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "step")
    return lines, at, json.loads(lines[at])


def _land_original(tmp_path: Path) -> Path:
    store = tmp_path / "s.duckdb"
    shutil.copytree(EXAMPLE / RUN, tmp_path / "a" / RUN)
    result = cli("ingest", tmp_path / "a", "--store", store)
    assert result.returncode == 0, result.stderr
    return store


def test_an_exact_copy_is_a_duplicate(tmp_path: Path) -> None:
    store = _land_original(tmp_path)
    before = _snapshot(store)
    shutil.copytree(EXAMPLE / RUN, tmp_path / "b" / RUN)
    result = cli("ingest", tmp_path / "b", "--store", store)
    assert result.returncode == 0, result.stderr
    assert "duplicate events skipped" in result.stdout and "CONFLICT" not in result.stdout
    assert _snapshot(store) == before
    assert query(store, "SELECT count(*) FROM quarantine")[0][0] == 0


def test_a_copy_with_one_event_changed_is_a_conflict(tmp_path: Path) -> None:
    store = _land_original(tmp_path)
    before = _snapshot(store)
    copy = tmp_path / "b" / RUN
    shutil.copytree(EXAMPLE / RUN, copy)
    rank1 = copy / "events-rank1.jsonl"
    lines, at, event = _first_step(rank1)
    event["t_total"] = float(event["t_total"]) * 10  # type: ignore[arg-type]  # one step ten times slower: another measurement, same id
    lines[at] = json.dumps(event)
    rank1.write_text("\n".join(lines) + "\n")

    result = cli("ingest", tmp_path / "b", "--store", store)
    assert result.returncode == 3, result.stderr
    assert "conflict" in result.stderr and str(rank1) in result.stderr
    assert "1 CONFLICTING events in 1 file(s)" in result.stdout
    assert _snapshot(store) == before  # nothing stored was replaced
    rows = query(store, "SELECT path, line, reason, raw FROM quarantine ORDER BY line")
    # every event of the run from the conflicting file is held, the changed one says what it conflicts with
    assert len(rows) == len(lines) and {r[0] for r in rows} == {str(rank1)}
    (conflict,) = [r for r in rows if r[2].startswith("conflict:")]
    assert conflict[1] == at + 1 and json.loads(conflict[3]) == event
    original = (tmp_path / "a" / RUN / "events-rank1.jsonl").resolve()
    assert f"already stored from {original} line {at + 1}" in conflict[2]
    assert all(r[2].startswith("held back:") for r in rows if r is not conflict)
    # the identical rank-0 file of the copy is a plain duplicate
    assert (
        query(
            store, "SELECT duplicates FROM ingested_files WHERE path = ?", [str(copy / "events-rank0.jsonl")]
        )[0][0]
        > 0
    )
    # ingesting again changes nothing and loses nothing
    again = cli("ingest", tmp_path / "b", "--store", store)
    assert again.returncode == 3 and "0 events landed" in again.stdout and _snapshot(store) == before
    assert query(store, "SELECT count(*) FROM quarantine")[0][0] == len(lines)


def test_two_different_runs_claiming_one_id_keep_the_first(tmp_path: Path) -> None:
    store = _land_original(tmp_path)
    before = _snapshot(store)
    other = tmp_path / "b" / RUN
    other.mkdir(parents=True)
    # another run (a different seed) whose files say they are the stored run
    source = EXAMPLE / "digits-mlp-2w-r1-20261121T085353"
    old_id = source.name
    for f in source.glob("events-rank*.jsonl"):
        (other / f.name).write_text(f.read_text().replace(old_id, RUN))
    result = cli("ingest", tmp_path / "b", "--store", store)
    assert result.returncode == 3
    assert _snapshot(store) == before
    held = query(store, "SELECT count(*) FROM quarantine")[0][0]
    assert held == sum(len(f.read_text().splitlines()) for f in other.glob("*.jsonl"))


def test_a_seq_written_twice_in_one_file_keeps_the_first_and_quarantines_the_second(tmp_path: Path) -> None:
    folder = tmp_path / "a" / RUN
    shutil.copytree(EXAMPLE / RUN, folder)
    rank0 = folder / "events-rank0.jsonl"
    lines, at, twin = _first_step(rank0)
    twin["t_total"] = float(twin["t_total"]) + 1.0  # type: ignore[arg-type]
    lines.insert(at + 1, json.dumps(twin))
    rank0.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.duckdb"
    result = cli("ingest", tmp_path / "a", "--store", store)
    assert result.returncode == 3
    (row,) = query(store, "SELECT line, reason FROM quarantine")
    assert row[0] == at + 2 and row[1].startswith("conflict within this file") and f"line {at + 1}" in row[1]
    assert (
        query(store, "SELECT count(*) FROM events")[0][0]
        == sum(len(f.read_text().splitlines()) for f in folder.glob("*.jsonl")) - 1
    )


def test_a_store_from_before_digests_is_migrated_and_compares_on_time_and_kind(tmp_path: Path) -> None:
    import duckdb

    from honestscale.store import migrations, open_store

    store = tmp_path / "s.duckdb"
    store_at_version(store, 2).close()  # a store as honestscale 0003's predecessor left it
    open_store(store).close()
    assert query(store, "SELECT max(version) FROM schema_version")[0][0] == migrations()[-1].version
    shutil.copytree(EXAMPLE / RUN, tmp_path / "a" / RUN)
    assert cli("ingest", tmp_path / "a", "--store", store).returncode == 0
    with duckdb.connect(str(store)) as con:
        # events landed before digests existed (events is a view over these two since migration 15)
        con.execute("UPDATE nonstep_events SET digest = NULL; UPDATE steps SET digest = NULL")
    shutil.copytree(EXAMPLE / RUN, tmp_path / "b" / RUN)
    same = cli("ingest", tmp_path / "b", "--store", store)
    assert same.returncode == 0 and "duplicate events skipped" in same.stdout
    changed = tmp_path / "c" / RUN
    shutil.copytree(EXAMPLE / RUN, changed)
    rank0 = changed / "events-rank0.jsonl"
    lines = rank0.read_text().splitlines()
    event = json.loads(lines[-1])
    event["time"] += 1.0
    lines[-1] = json.dumps(event)
    rank0.write_text("\n".join(lines) + "\n")
    assert cli("ingest", tmp_path / "c", "--store", store).returncode == 3
    assert query(store, "SELECT count(*) FROM quarantine WHERE reason LIKE 'conflict:%'")[0][0] == 1
