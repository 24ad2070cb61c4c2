"""Native event files: idempotent, incremental, atomic per file, lossless, safe under concurrency."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from honestscale import events as ev
from honestscale.collector._sources import discover
from honestscale.collector.ingest import Ingester
from honestscale.store import open_store
from tests.conftest import EXAMPLE, REPO, Lines, cli, counts, held_store, hs_start, query, snapshot
from tests.runs import big_campaign, wait_for, write_run


def land(store: Path, *paths: Path, force: bool = False) -> Any:
    con = open_store(store)
    try:
        return Ingester(con, force=force).ingest(discover([str(p) for p in paths]).sources)
    finally:
        con.close()


def test_example_campaign_lands(store: Path) -> None:
    result = cli("ingest", REPO / "examples", "--store", store)
    assert result.returncode == 0, result.stderr
    every = json.loads(cli("runs", "--store", store, "--format", "json").stdout)
    # examples/ also holds the compare example's 24 runs (examples/compare/runs), each landed
    assert len(every) == 4 + len(list((REPO / "examples" / "compare" / "runs").glob("*/events-rank0.jsonl")))
    runs = [r for r in every if r["campaign"] == "digits-ddp-example"]
    assert len(runs) == 4
    assert {r["status"] for r in runs} == {"success"}
    assert sorted(r["world_size"] for r in runs) == [1, 1, 2, 2]
    assert {r["n_accelerators"] for r in runs} == {0}  # CPU runs: workers are processes, no accelerator
    for r in runs:
        assert r["final_accuracy"]["split"] == "test"
        assert 0.9 < r["final_accuracy"]["value"] <= 1.0
        assert r["source"] == "native" and r["framework"] == "torch"
        assert r["time_to_train_s"] > 0
    lines = sum(len(p.read_text().splitlines()) for p in (REPO / "examples").rglob("*.jsonl"))
    assert counts(store)["events"] == lines


def test_runs_json_and_csv_fields(store: Path, tmp_path: Path) -> None:
    write_run(tmp_path / "ev", "r1")
    assert cli("ingest", tmp_path / "ev", "--store", store).returncode == 0
    (run,) = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    required = {"run_id", "source", "campaign", "system", "framework", "purpose", "n_nodes", "n_accelerators",
                "accelerator", "global_batch_size", "local_batch_size", "status", "started_at", "time_to_train_s",
                "final_accuracy", "source_file"}  # fmt: skip
    assert required <= run.keys()
    assert run["final_accuracy"] == {"split": "test", "metric": "accuracy", "value": 0.91}
    assert run["campaign"] == "c1" and run["local_batch_size"] == 32
    csv = cli("runs", "--store", store, "-f", "csv").stdout.splitlines()
    assert csv[0].startswith("run_id,source,campaign") and len(csv) == 2
    shown = json.loads(cli("show", "r1", "--store", store, "-f", "json").stdout)
    assert [s["steps"] for s in shown["step_breakdown"]] == [20, 20]
    assert shown["step_breakdown"][0]["t_comm"] == pytest.approx(20 * 0.015)


def test_ingesting_twice_adds_nothing(store: Path) -> None:
    land(store, EXAMPLE)
    before = snapshot(store)
    log_rows = query(store, "SELECT count(*) FROM ingest_log")[0][0]
    again = land(store, EXAMPLE)
    assert again.events == 0 and again.changed == 0
    assert snapshot(store) == before
    assert query(store, "SELECT count(*) FROM ingest_log")[0][0] == log_rows
    # Forced to read every file again, each file's events are replaced by the same events.
    forced = land(store, EXAMPLE, force=True)
    assert forced.events == len(before["events"]) and forced.duplicates == 0
    assert snapshot(store) == before


def test_grown_file_adds_only_new_events(tmp_path: Path) -> None:
    full = write_run(tmp_path / "full", "r1", world=1, steps=50)[0]
    lines = full.read_bytes().splitlines(keepends=True)
    grow = tmp_path / "grow" / "r1" / "events-rank0.jsonl"
    grow.parent.mkdir(parents=True)
    grow.write_bytes(b"".join(lines[:20]))
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    first = land(a, grow)
    assert first.events == 20
    assert query(a, "SELECT status FROM runs")[0][0] == "incomplete"
    with grow.open("ab") as fh:
        fh.write(b"".join(lines[20:]))
    second = land(a, grow)
    assert second.files[0].action == "grown" and second.events == len(lines) - 20
    assert query(a, "SELECT status FROM runs")[0][0] == "success"
    land(b, full)
    sa, sb = snapshot(a), snapshot(b)

    def strip(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
        return [tuple(v for v in r if "/grow/" not in str(v) and "/full/" not in str(v)) for r in rows]

    for table in ("runs", "events", "steps", "evals"):
        assert strip(sa[table]) == strip(sb[table]), table


def test_truncated_line_is_quarantined_until_the_file_grows(tmp_path: Path, store: Path) -> None:
    path = write_run(tmp_path / "ev", "r1", world=1, steps=5)[0]
    data = path.read_bytes()
    cut = len(data) - 30  # inside the last line (run_stop)
    path.write_bytes(data[:cut])
    result = cli("ingest", path, "--store", store)
    assert result.returncode == 3
    q = json.loads(cli("quarantine", "--store", store, "-f", "json").stdout)
    n_lines = data.count(b"\n")
    assert len(q) == 1 and q[0]["line"] == n_lines and "incomplete last line" in q[0]["reason"]
    assert q[0]["file"] == str(path.resolve())
    assert counts(store)["events"] == n_lines - 1  # every complete line landed
    path.write_bytes(data)  # the writer finishes the line
    assert cli("ingest", path, "--store", store).returncode == 0
    assert counts(store)["quarantine"] == 0 and counts(store)["events"] == n_lines
    assert query(store, "SELECT status FROM runs")[0][0] == "success"


def test_bad_inputs_give_clear_messages_and_valid_lines_around_them_land(tmp_path: Path, store: Path) -> None:
    good = [json.dumps(e) for e in _events("r1", 6)]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "garbage.jsonl").write_bytes(good[0].encode() + b"\n" + os.urandom(300).replace(b"\n", b"") + b"\n"
                                           + good[1].encode() + b"\n")  # fmt: skip
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "notevent.jsonl").write_text(good[2] + "\n" + json.dumps({"model": "resnet50", "acc": 0.76}) + "\n"
                                           + good[3] + "\n")  # fmt: skip
    future = json.loads(good[4]) | {"schema": ev.SCHEMA_VERSION + 1, "new_field": 1}
    (folder / "future.jsonl").write_text(json.dumps(future) + "\n" + good[5] + "\n")
    result = cli("ingest", folder, "--store", store)
    assert result.returncode == 3
    assert "empty file" in result.stderr
    q = {
        x["file"].rsplit("/", 1)[1]: x
        for x in json.loads(cli("quarantine", "--store", store, "-f", "json").stdout)
    }
    assert q["garbage.jsonl"]["line"] == 2 and "not UTF-8" in q["garbage.jsonl"]["reason"]
    assert q["notevent.jsonl"]["line"] == 2 and "not a honestscale event" in q["notevent.jsonl"]["reason"]
    assert json.loads(q["notevent.jsonl"]["raw"]) == {"model": "resnet50", "acc": 0.76}
    assert (
        f"event schema {ev.SCHEMA_VERSION + 1} is newer" in q["future.jsonl"]["reason"]
        and "upgrade" in q["future.jsonl"]["reason"]
    )
    assert len(q) == 3
    landed = sorted(r[0] for r in query(store, "SELECT seq FROM events"))
    assert landed == [0, 1, 2, 3, 5]


def _events(run_id: str, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"schema": 1, "run_id": run_id, "rank": 0, "seq": 0, "time": 1.7e9, "kind": "run_start",
                                  "framework": "torch", "world_size": 1}]  # fmt: skip
    for i in range(1, n):
        out.append({"schema": 1, "run_id": run_id, "rank": 0, "seq": i, "time": 1.7e9 + i, "kind": "step",
                    "step": i, "samples": 8, "t_total": 0.1})  # fmt: skip
    return out


def test_exit_codes_and_usage_errors(tmp_path: Path, store: Path) -> None:
    missing = cli("ingest", tmp_path / "nope", "--store", store)
    assert missing.returncode == 2 and "no such file" in missing.stderr and not store.exists()
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    r = cli("ingest", other, "--store", store)
    assert r.returncode == 2 and "neither a honestscale event file" in r.stderr
    assert cli("ingest", "--store", store).returncode == 2
    assert cli("runs", "--store", tmp_path / "none.duckdb").returncode == 2


def test_gzip_and_globs(tmp_path: Path, store: Path) -> None:
    paths = write_run(tmp_path / "ev", "r1", world=2, steps=10)
    gz = paths[1].with_suffix(".jsonl.gz")
    gz.write_bytes(gzip.compress(paths[1].read_bytes()))
    paths[1].unlink()
    result = cli("ingest", str(tmp_path / "ev" / "**" / "events-rank*"), "--store", store)
    assert result.returncode == 0, result.stderr
    assert counts(store)["events"] == 2 * (1 + 10 + 1) + 1
    assert query(store, "SELECT ranks_seen, ranks_stopped FROM runs") == [(2, 2)]


def test_an_edited_file_is_kept_until_forced_then_replaces_its_events(tmp_path: Path, store: Path) -> None:
    path = write_run(tmp_path / "ev", "r1", world=1, steps=10)[0]
    land(store, path)
    lines = path.read_text().splitlines()
    edited = [json.loads(x) for x in lines]
    edited[3]["samples"] = 999
    path.write_text("\n".join(json.dumps(e) for e in edited[:-1]) + "\n")  # drop run_stop, change one step
    result = land(store, path)
    assert result.files[0].action == "kept"
    assert result.not_landed() and "--force" in result.not_landed()[0][1]
    assert query(store, "SELECT count(*), max(samples) FROM steps") == [(10, 64)]
    assert query(store, "SELECT status FROM runs") == [("success",)]
    result = land(store, path, force=True)
    assert result.files[0].action == "forced"
    assert query(store, "SELECT count(*), max(samples) FROM steps") == [(10, 999)]
    assert query(store, "SELECT status FROM runs") == [("incomplete",)]


def test_extra_fields_are_kept(tmp_path: Path, store: Path) -> None:
    e = _events("r1", 2)
    e[1]["gpu_temp_c"] = 71
    f = tmp_path / "r1" / "events-rank0.jsonl"
    f.parent.mkdir()
    f.write_text("\n".join(json.dumps(x) for x in e) + "\n")
    land(store, f)
    payload = query(store, "SELECT payload FROM events WHERE kind = 'step'")[0][0]
    assert json.loads(str(payload))["gpu_temp_c"] == 71


def _variants() -> list[dict[str, Any]]:
    """Events that break every field of every kind in every way, and the good ones."""
    good: dict[str, dict[str, Any]] = {
        "run_start": {"framework": "torch", "world_size": 2, "purpose": "final", "software": {"cuda": "12"}},
        "step": {"step": 0, "samples": 32, "t_total": 0.01, "warmup": False},
        "epoch": {"epoch": 0, "train_loss": 0.5},
        "eval": {"split": "test", "metric": "accuracy", "value": 0.9},
        "system": {"power_w": 250.0},
        "run_stop": {"status": "success"},
    }
    out: list[dict[str, Any]] = []
    seq = 0
    for kind in ev.KINDS:
        base: dict[str, Any] = {"schema": 1, "run_id": "v", "rank": 0, "seq": 0, "time": 1.7e9, "kind": kind}
        base |= good[kind]
        wrong = {"string": 5, "integer": 1.5, "number": "x", "boolean": 1, "object": [1], "array": {"a": 1}}
        for f in ev.fields_of(kind):
            cases: list[Any] = [wrong[f.type], None, "__missing__", True]
            if f.enum:
                cases.append("bogus")
            if f.minimum is not None:
                cases.append(-5)
            if f.type == "number":
                cases.append(3)
            for value in cases:
                e = dict(base)
                if value == "__missing__":
                    e.pop(f.name, None)
                else:
                    e[f.name] = value
                e["seq"] = seq if f.name != "seq" else e.get("seq")
                seq += 1
                out.append(e)
        b = dict(base)
        b["seq"] = seq
        seq += 1
        out.append(b)
    return out


def test_fast_validator_agrees_with_the_contract(tmp_path: Path, store: Path) -> None:
    variants = _variants()
    f = tmp_path / "v" / "events-rank0.jsonl"
    f.parent.mkdir()
    f.write_text("\n".join(json.dumps(e) for e in variants) + "\n")
    land(store, f)
    expected_ok = set()
    for number, e in enumerate(variants, start=1):
        try:
            ev.validate(e)
            expected_ok.add(number)
        except ev.EventError:
            pass
    landed = {int(r[0]) for r in query(store, "SELECT line FROM events")}
    quarantined = {int(r[0]) for r in query(store, "SELECT line FROM quarantine")}
    duplicates = expected_ok - landed
    assert landed <= expected_ok
    assert quarantined == set(range(1, len(variants) + 1)) - expected_ok
    # Accepted lines that did not land share a (run, rank, seq) with an earlier line (the seq variants).
    assert all(variants[n - 1]["seq"] in {variants[m - 1]["seq"] for m in landed} for n in duplicates)
    reasons = [str(r[0]) for r in query(store, "SELECT reason FROM quarantine")]
    assert not any("please report" in r for r in reasons)


def test_kill_9_mid_ingest_then_reingest_equals_one_clean_ingest(tmp_path: Path) -> None:
    folder = tmp_path / "big"
    big_campaign(folder)
    clean, killed = tmp_path / "clean.duckdb", tmp_path / "killed.duckdb"
    small_batches = {"HONESTSCALE_INGEST_BATCH_MB": "1"}  # about one file per transaction
    assert cli("ingest", folder, "--store", clean, env=small_batches).returncode == 0
    proc = hs_start("ingest", folder, "--store", killed, "-v", env=small_batches)
    assert proc.stderr is not None
    said = Lines(proc.stderr)
    said.wait_for("landed ")  # the first batch is committed: killed now, some files have landed, not all
    assert proc.poll() is None, "ingest finished before the kill: make the campaign bigger"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = counts(killed)
    assert 0 < partial["ingested_files"] < 24, (partial, said.text())
    assert partial["events"] == partial["ingested_files"] * 6002  # only whole files, never half of one
    assert cli("ingest", folder, "--store", killed).returncode == 0
    assert snapshot(killed) == snapshot(clean)


def test_a_second_ingest_waits_or_refuses(tmp_path: Path, store: Path) -> None:
    write_run(tmp_path / "ev", "r1")
    with held_store(store) as held:
        refused = cli("ingest", tmp_path / "ev", "--store", store, "--wait", "0.5")
        assert refused.returncode == 75  # held past --wait: retry later (exits.TEMPFAIL), was 2
        assert "in use by process" in refused.stderr and "--wait" in refused.stderr
        waiting = hs_start("ingest", tmp_path / "ev", "--store", store, "--wait", "300")
        assert waiting.stderr is not None
        err = Lines(waiting.stderr)
        err.wait_for("waiting")  # it says it waits, while the store is still held
        assert waiting.poll() is None and held.holding()
        held.release()
        assert waiting.wait(120) == 0, err.text()
    assert counts(store)["runs"] == 1


def test_two_concurrent_ingests_never_corrupt(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "big"
    big_campaign(folder, files=8, steps=3000)
    cmd = [sys.executable, "-m", "honestscale", "ingest", str(folder), "--store", str(store), "--wait", "60"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    codes = [p.wait(120) for p in procs]
    assert codes == [0, 0]
    once = tmp_path / "once.duckdb"
    cli("ingest", folder, "--store", once)
    assert snapshot(store) == snapshot(once)


def test_watch_ingests_growing_files_and_lets_readers_in(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "campaign"
    folder.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "honestscale", "ingest", "--watch", str(folder), "--store", str(store),
         "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        w = ev.EventWriter(folder, "live", 0)
        w.run_start(framework="torch", world_size=1)
        for i in range(5):
            w.step(step=i, samples=8, t_total=0.1)
        wait_for(lambda: _events_in(store) == 6)
        runs = cli("runs", "--store", store, "-f", "json", "--wait", "10")
        assert runs.returncode == 0 and json.loads(runs.stdout)[0]["status"] == "incomplete"
        for i in range(5, 10):
            w.step(step=i, samples=8, t_total=0.1)
        w.run_stop("success")
        w.close()
        wait_for(lambda: _events_in(store) == 12)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "watch stopped" in out
    assert query(store, "SELECT status FROM runs") == [("success",)]


def _events_in(store: Path) -> int:
    try:
        return counts(store)["events"]
    except Exception:  # store locked by the watcher mid-cycle, or not created yet
        return -1


def test_example_copy_keeps_working_after_move(tmp_path: Path, store: Path) -> None:
    """Files are keyed by path: a moved copy is a new file, and its events are duplicates, not new runs."""
    land(store, EXAMPLE)
    copy = tmp_path / "copy"
    shutil.copytree(EXAMPLE, copy)
    result = land(store, copy)
    assert result.events == 0 and result.duplicates > 0
    assert counts(store)["runs"] == 4


def _derived_tables_agree(store: Path) -> None:
    """run_ranks and markers, kept incrementally, equal what a full scan of events gives."""
    kept = query(store, "SELECT run_id, rank, events, first_seq, last_seq FROM run_ranks ORDER BY ALL")
    full = query(
        store,
        "SELECT run_id, rank, count(*), min(seq), max(seq) FROM events GROUP BY run_id, rank ORDER BY ALL",
    )
    assert kept == full
    markers = query(store, "SELECT run_id, rank, seq, kind FROM markers ORDER BY ALL")
    from_events = query(
        store,
        "SELECT run_id, rank, seq, kind FROM events WHERE kind IN ('run_start', 'run_stop') ORDER BY ALL",
    )
    assert markers == from_events


def test_incremental_bookkeeping_matches_a_full_recount(tmp_path: Path, store: Path) -> None:
    paths = write_run(tmp_path / "ev", "r1", world=2, steps=30)
    data = paths[0].read_bytes()
    paths[0].write_bytes(data[: len(data) // 2])  # rank 0 half written
    land(store, tmp_path / "ev")
    _derived_tables_agree(store)
    paths[0].write_bytes(data)  # grows
    land(store, tmp_path / "ev")
    _derived_tables_agree(store)
    text = paths[1].read_text().splitlines()
    paths[1].write_text("\n".join(text[:10]) + "\n")  # rewritten shorter: kept until forced
    assert land(store, tmp_path / "ev").files[1].action == "kept"
    _derived_tables_agree(store)
    land(store, tmp_path / "ev", force=True)
    _derived_tables_agree(store)
    assert query(store, "SELECT ranks_seen, ranks_stopped, status FROM runs") == [(2, 1, "success")]


class _Shuffled:
    """A reader connection whose first result comes back in another order than its input (as DuckDB may return
    rows without insertion order preserved)."""

    def __init__(self, con: Any) -> None:
        self.con, self.calls = con, 0

    def sql(self, query: str) -> Any:
        self.calls += 1
        rel = self.con.sql(query)
        return rel.order("hash(file_id, pos)") if self.calls == 1 else rel

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


@pytest.mark.parametrize("order", ["as DuckDB returns it", "shuffled"])
def test_every_line_keeps_its_own_kind_digest_and_shape(order: str) -> None:
    """The reader computes each line's kind, digest and shape while the previous batch lands, and puts them beside
    the lines without copying the text back: a line must never get another line's columns."""
    import duckdb
    import pyarrow as pa

    from honestscale.collector._content import read_content, split_lines
    from honestscale.collector._native import lines_batch, shaped

    files = sorted((REPO / "examples" / "compare" / "runs").rglob("*.jsonl"))
    batches = [lines_batch(i, 1, split_lines(read_content(f).data, 0, 1).text) for i, f in enumerate(files)]
    con = duckdb.connect()
    con.execute("SET threads = 2; SET preserve_insertion_order = false")
    reader: Any = con.cursor() if order != "shuffled" else _Shuffled(con.cursor())
    got = shaped(reader, batches)
    assert got is not None
    con.register("got", got)
    con.register("lines", pa.Table.from_batches(batches))
    total, paired, wrong = con.execute(
        "SELECT (SELECT count(*) FROM lines), count(*), count(*) FILTER (WHERE g.raw IS DISTINCT FROM l.raw "
        "OR g.digest <> hash(l.raw) OR g.kind IS DISTINCT FROM l.raw ->> '$.kind' "
        "OR g.shape IS DISTINCT FROM hash(json_keys(l.raw), json_type(l.raw, '$.*'))) "
        "FROM got g JOIN lines l USING (file_id, pos)"
    ).fetchall()[0]
    assert total > 3_000 and paired == total == got.num_rows and wrong == 0


def test_many_small_files_land_in_batches_of_at_most_batch_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is bounded by its files as well as its bytes (many small files cost more memory than their bytes):
    every batch holds at most BATCH_FILES files, and every file lands, as in one batch."""
    from honestscale.collector import ingest

    runs = REPO / "examples" / "compare" / "runs"
    files = sorted(runs.rglob("*.jsonl"))
    batches: list[int] = []
    real = ingest.Ingester._run

    def counted(self: Ingester, plans: list[Any], *args: Any) -> None:
        batches.append(len(plans))
        real(self, plans, *args)

    monkeypatch.setattr(ingest.Ingester, "_run", counted)
    monkeypatch.setattr(ingest, "BATCH_FILES", 4)
    assert cli("ingest", runs, "--store", tmp_path / "bounded.duckdb").returncode == 0
    assert max(batches) == 4 and sum(batches) == len(files) > 8, batches
    monkeypatch.setattr(ingest, "BATCH_FILES", 10_000)
    assert cli("ingest", runs, "--store", tmp_path / "one.duckdb").returncode == 0
    assert snapshot(tmp_path / "bounded.duckdb") == snapshot(tmp_path / "one.duckdb")
