"""The conformance matrix (tests/conformance/cells.toml): every cell's log, written by the real tool in one
configuration its users run, lands as one training of the world it ran in, every optimizer step counted once, its
final quality its last evaluation, its status its last launch's and its stop no earlier than the last value it
logged, each checked against the generator's own counts (``expected.json``), never the reader's helpers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import duckdb
import pytest

from tests.conformance.invariants import CLOCK_S, FIXTURES, Expected, cells, check
from tests.importing import ingest, run_cli, runs

CELLS = cells()


@pytest.mark.parametrize("name", list(CELLS))
def test_a_cell_lands_one_training_as_its_generator_counted_it(tmp_path: Path, name: str) -> None:
    folder = FIXTURES / name
    assert (folder / "PROVENANCE.json").is_file(), f"no fixture: scripts/conformance --regenerate {name}"
    store = tmp_path / "s.duckdb"
    ingest(store, folder)
    expected = Expected.read(folder)
    assert check(store, expected) == []
    # what a user reads: `show` counts optimizer steps, never the logging intervals they were logged in (of the
    # run counted: a log that another record of the training supersedes is listed, in no statistic)
    (run,) = [r for r in runs(store) if r["run_id"] not in _superseded(store)]
    code, out = run_cli("show", run["run_id"], "--store", str(store), "-f", "json")
    assert code == 0, out
    breakdown = json.loads(out)["step_breakdown"]
    if not expected.steps_known:
        assert breakdown == [], breakdown
        return
    first = breakdown[0]
    assert first["steps"] + first["warmup_steps"] == expected.optimizer_steps, first
    # each launch's first interval, opened by its start, holds the start-up: warm-up, counted by no step statistic
    con = duckdb.connect(str(store), read_only=True)
    try:
        (marked,) = con.execute(
            "SELECT count(*) FILTER (WHERE warmup) FROM steps WHERE run_id = ? AND rank = "
            "(SELECT min(rank) FROM steps WHERE run_id = ?)",
            [run["run_id"], run["run_id"]],
        ).fetchone() or (0,)
    finally:
        con.close()
    assert marked == len(expected.spans), (marked, expected.spans)


def _superseded(store: Path) -> set[str]:
    con = duckdb.connect(str(store), read_only=True)
    try:
        return {str(r) for (r,) in con.execute("SELECT run_id FROM superseded_runs").fetchall()}
    finally:
        con.close()


# the resumed trainings whose log records their end (a time to train): TensorBoard's records none
RESUMED = [
    name
    for name in CELLS
    if len(Expected.read(FIXTURES / name).spans) > 1 and Expected.read(FIXTURES / name).end_recorded
]


@pytest.mark.parametrize("name", RESUMED)
def test_a_resumed_trainings_time_says_the_pause_it_leaves_out(tmp_path: Path, name: str) -> None:
    """A time to train that leaves out the pause between launches says so wherever it is shown (``show``, the
    run page): "run_start to the last run_stop" alone would be a time the reader cannot make of the two times."""
    import html as entities
    import re
    from urllib.parse import quote

    from tests.serving import start, stop

    store = tmp_path / "s.duckdb"
    ingest(store, FIXTURES / name)
    (run,) = runs(store)
    spans = Expected.read(FIXTURES / name).spans
    gaps = sum(b[0] - a[1] for a, b in itertools.pairwise(spans))
    paused = float(run["paused_s"])
    # the pause is the launches' own (the end of one to the start of the next): within the generator's gap
    # between the last value of one launch and the first of the next
    assert 0 < paused <= gaps + CLOCK_S, (paused, gaps)
    code, out = run_cli("show", run["run_id"], "--store", str(store))
    assert code == 0, out
    assert re.search(r"between its\s+launches left out", out), out
    server = start(store)
    try:
        status, html, _ = server.get(f"/runs/{quote(run['run_id'], safe='')}")
    finally:
        stop(server)
    assert status == 200, html
    words = " ".join(entities.unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert "run_start to the last run_stop, less the" in words and "between its launches; one run" in words, (
        words
    )
