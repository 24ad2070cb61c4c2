"""Nothing lost to a file's name, nothing read through a link out of the tree, one exit-code table (issue 76).

Each test sets up what a user's or an attacker's folder holds (a name that is not UTF-8, a link to a file the store
must not hold, a line nested 100,000 deep) and checks what landed with a few lines of SQL, never the collector's
helpers."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from honestscale import exits
from honestscale.collector.watch import Watcher
from honestscale.store import open_store
from tests.conftest import REPO, cli, query
from tests.runs import write_run

BAD_NAME = b"r-\xff\xfe"


def _runs(store: Path) -> set[str]:
    return {r[0] for r in query(store, "SELECT run_id FROM runs")}


def _rename(folder: Path, name: bytes) -> Path:
    """The folder renamed to a name the OS gives as bytes (not UTF-8: Python holds it with lone surrogates)."""
    target = folder.parent / os.fsdecode(name)
    folder.rename(target)
    return target


def test_a_folder_whose_name_is_not_utf8_lands_beside_the_good_run(tmp_path: Path) -> None:
    events = tmp_path / "ev"
    write_run(events, "good")
    write_run(events, "odd")
    _rename(events / "odd", BAD_NAME)
    store = tmp_path / "s.duckdb"
    got = cli("ingest", events, "--store", store, "-v")
    assert got.returncode == exits.OK and "Traceback" not in got.stderr, got.stderr
    assert _runs(store) == {"good", "odd"}
    stored = {r[0] for r in query(store, "SELECT path FROM ingested_files")}
    assert f"{events}/r-\\xff\\xfe/events-rank0.jsonl" in stored  # the bytes as backslash escapes
    assert "r-\\xff\\xfe/events-rank0.jsonl: " in got.stderr  # and so on the terminal
    assert (
        cli("ingest", events, "--store", store).returncode == exits.OK
    )  # again: found unchanged by its name
    lines = sum(len(p.read_bytes().splitlines()) for p in events.rglob("*.jsonl"))
    assert query(store, "SELECT sum(events) FROM ingested_files")[0][0] == lines == 90


def test_watch_goes_on_past_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    events = tmp_path / "ev"
    write_run(events, "odd")
    _rename(events / "odd", BAD_NAME)
    store = tmp_path / "s.duckdb"

    def opened() -> object:
        from contextlib import closing

        return closing(open_store(store))

    watcher = Watcher(events, opened)  # type: ignore[arg-type]
    first = watcher.poll()
    assert not first.problems and {r for f in first.landed for r in f.run_ids} == {"odd"}
    write_run(events, "later")  # a file that comes after it lands on the next poll
    second = watcher.poll()
    assert not second.problems and {r for f in second.landed for r in f.run_ids} == {"later"}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.binary(min_size=1, max_size=24).filter(lambda b: b"/" not in b and b"\0" not in b))
def test_any_byte_string_as_a_name_lands_or_is_named_never_raises(tmp_path: Path, name: bytes) -> None:
    base = tmp_path / os.urandom(4).hex()
    events = base / "ev"
    write_run(events, "r", world=1, steps=2)
    if name.startswith(b".") or name in (b".", b".."):
        return  # hidden: left out of a walk by design
    folder = _rename(events / "r", name)
    (folder / (os.fsdecode(name) + ".txt")).write_bytes(b"not an event\n")
    store = base / "s.duckdb"
    got = cli("ingest", events, "--store", store)
    assert got.returncode == exits.OK and "Traceback" not in got.stderr, got.stderr
    assert _runs(store) == {"r"}
    assert "not landed, neither a honestscale event file" in got.stderr  # the other file is named


def test_a_link_out_of_the_tree_is_never_opened_and_an_in_tree_link_is_read_once(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    write_run(secret, "secret", world=1)  # a file the store must not hold (another user's run, /etc/passwd)
    events = tmp_path / "ev"
    write_run(events, "good", world=1)
    (events / "good" / "events-rank1.jsonl").symlink_to(secret / "secret" / "events-rank0.jsonl")
    (events / "linked").symlink_to(secret, target_is_directory=True)
    (events / "twice.jsonl").symlink_to(events / "good" / "events-rank0.jsonl")
    (events / "debug-core.log").symlink_to(tmp_path / "cache" / "gone.log")  # W&B's link into its cache
    store = tmp_path / "s.duckdb"
    got = cli("ingest", events, "--store", store)
    assert got.returncode == exits.OK, got.stderr  # links left alone leave the exit code alone
    assert _runs(store) == {"good"}
    assert query(store, "SELECT count(*) FROM quarantine")[0][0] == 0
    assert query(store, "SELECT count(*) FROM ingested_files")[0][0] == 1  # the in-tree link: read once
    assert "3 links not opened" in got.stdout and str(secret) not in got.stderr  # -v lists them
    listed = cli("ingest", events, "--store", store, "-v").stderr
    assert "events-rank1.jsonl" in listed and "debug-core.log" in listed and "links to nothing" in listed
    allowed = cli("ingest", events, "--store", store, "--follow-links", secret)
    assert allowed.returncode == exits.OK and _runs(store) == {"good", "secret"}


def test_a_file_named_as_events_that_no_reader_recognises_keeps_no_text(tmp_path: Path) -> None:
    folder = tmp_path / "ev" / "r"
    folder.mkdir(parents=True)
    (folder / "events-rank0.jsonl").write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:\n")
    store = tmp_path / "s.duckdb"
    got = cli("ingest", tmp_path / "ev", "--store", store)
    assert got.returncode == exits.CANNOT_JUDGE and "holds no honestscale event line" in got.stderr
    assert query(store, "SELECT line, raw FROM quarantine ORDER BY line") == [(1, ""), (2, "")]


def test_json_nested_deeper_than_the_contract_allows_is_quarantined(tmp_path: Path) -> None:
    write_run(tmp_path / "ev", "r", world=1, steps=4)
    path = tmp_path / "ev" / "r" / "events-rank0.jsonl"
    lines = path.read_text().splitlines()
    steps = [i for i, line in enumerate(lines) if json.loads(line)["kind"] == "step"]
    for i, depth in zip(steps, (100_000, 65, 64, 2), strict=True):  # the event itself is level 1
        lines[i] = lines[i][:-1] + ', "extra": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    path.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.duckdb"
    assert cli("ingest", tmp_path / "ev", "--store", store).returncode == exits.CANNOT_JUDGE
    held = query(store, "SELECT line, reason FROM quarantine ORDER BY line")
    assert [line for line, _ in held] == [steps[0] + 1, steps[1] + 1]
    assert "nested 100,000 levels deep, deeper than the contract's 64" in held[0][1]
    assert query(store, "SELECT count(*) FROM steps")[0][0] == 2


def test_one_exit_code_table_in_the_help_and_docs() -> None:
    assert exits.markdown() in (REPO / "docs" / "cli.md").read_text()
    assert [code for code, _ in exits.EXITS] == [0, 1, 2, 3, 75, 130]
    shown = " ".join(cli("--help").stdout.split())
    assert f"* 75: {exits.meaning(exits.TEMPFAIL)[:40]}" in shown
