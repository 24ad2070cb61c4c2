"""The conformance matrix (tests/conformance/cells.toml): every cell's log, written by the real tool in one
configuration its users run, lands as one training of the world it ran in, every optimizer step counted once, its
final quality its last evaluation, its status its last launch's and its stop no earlier than the last value it
logged, each checked against the generator's own counts (``expected.json``), never the reader's helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.invariants import FIXTURES, Expected, cells, check
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
    # what a user reads: `show` counts optimizer steps, never the logging intervals they were logged in
    (run,) = runs(store)
    code, out = run_cli("show", run["run_id"], "--store", str(store), "-f", "json")
    assert code == 0, out
    first = json.loads(out)["step_breakdown"][0]
    assert first["steps"] + first["warmup_steps"] == expected.optimizer_steps, first
