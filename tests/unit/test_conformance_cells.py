"""The conformance matrix's committed fixtures are what their generators write now: a cell whose generator, pinned
versions or spec changed since its fixture was written is stale (scripts/conformance --stale regenerates it)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from types import ModuleType

import pytest

from tests.conformance.invariants import FIXTURES, cells
from tests.conftest import REPO


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("conformance_script", str(REPO / "scripts" / "conformance"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", list(cells()))
def test_every_cells_fixture_is_current_and_says_where_it_came_from(name: str) -> None:
    script = _script()
    cell = cells()[name]
    assert script.stale(name, cell) is None, f"{name}: scripts/conformance --regenerate {name}"
    provenance = json.loads((FIXTURES / name / "PROVENANCE.json").read_text())
    assert provenance["versions"] == script.pins(cell) or all(
        provenance["versions"][p].split("+")[0] == v for p, v in script.pins(cell).items()
    )
    assert provenance["exits"] == cell["exit"] and provenance["commands"]


def test_a_changed_generator_makes_its_cell_stale() -> None:
    script = _script()
    name, cell = next(iter(cells().items()))
    assert script.stale(name, {**cell, "launches": [["--epochs", "9"]]}) is not None
