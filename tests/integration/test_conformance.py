"""The conformance matrix (tests/conformance/cells.toml): every cell's log, written by the real tool in one
configuration its users run, lands as one training of the world it ran in, every optimizer step counted once, its
final quality its last evaluation, its status its last launch's and its stop no earlier than the last value it
logged, each checked against the generator's own counts (``expected.json``), never the reader's helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.invariants import FIXTURES, Expected, cells, check
from tests.importing import ingest

CELLS = cells()


@pytest.mark.parametrize("name", list(CELLS))
def test_a_cell_lands_one_training_as_its_generator_counted_it(tmp_path: Path, name: str) -> None:
    folder = FIXTURES / name
    assert (folder / "PROVENANCE.json").is_file(), f"no fixture: scripts/conformance --regenerate {name}"
    store = tmp_path / "s.duckdb"
    ingest(store, folder)
    assert check(store, Expected.read(folder)) == []
