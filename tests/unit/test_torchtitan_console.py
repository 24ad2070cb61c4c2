"""torchtitan's console reader on a real console (tests/data/imported, an H200 run) with one printed fact made
unreadable: the fact is quarantined with its line and field, never made of the others or skipped as no match."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers.torchtitan.console import parse

CONSOLE = Path(__file__).parents[1] / "data" / "imported" / "torchtitan-console-sl.log.gz"


def _read(pattern: str, token: str) -> tuple[Parsed, int]:
    """The console with ``pattern``'s group 1 first written as ``token``; what the reader made of it, and that line."""
    text = gzip.decompress(CONSOLE.read_bytes()).decode()
    m = re.search(pattern, text, re.MULTILINE)
    assert m is not None, pattern
    changed = text[: m.start(1)] + token + text[m.end(1) :]
    return parse(CONSOLE, changed, None), text.count("\n", 0, m.start(1)) + 1


def _run_start(parsed: Parsed) -> dict[str, object]:
    return next(e for _, e in parsed.events if e["kind"] == "run_start")


def test_the_unchanged_console_quarantines_nothing_and_knows_its_mesh_and_parameters() -> None:
    parsed = parse(CONSOLE, gzip.decompress(CONSOLE.read_bytes()).decode(), None)
    assert parsed.bad == []
    start = _run_start(parsed)
    assert start["params_total"] == 6_163_712 and start["world_size"] == 1


@pytest.mark.parametrize(
    ("pattern", "token", "field"),
    [
        (r"size: ([\d,]+) total parameters", "NaN", "total parameters"),
        (r"with parallelism: pp=(\d+)", "NaN", "mesh pp"),
        (r"with parallelism: .*\btp=(\d+)", "two", "mesh tp"),
        (r"Training starts at step (\d+)", "one", "training starts at step"),
        (r"Peak FLOPS used for computing MFU: (\S+)", "nan", "peak FLOPS"),
    ],
)
def test_a_fact_printed_unreadable_is_quarantined_by_line_and_field(
    pattern: str, token: str, field: str
) -> None:
    parsed, line = _read(pattern, token)
    said = [(b.line, b.reason) for b in parsed.bad]
    assert any(n == line and f"field {field!r}" in why for n, why in said), said


def test_a_mesh_with_one_unreadable_dimension_is_no_mesh() -> None:
    """A world size made of the dimensions left would be a guess (tp=NaN of a tp=8 mesh would read 1 GPU)."""
    parsed, _ = _read(r"with parallelism: .*\btp=(\d+)", "NaN")
    start = _run_start(parsed)
    assert start.get("world_size") is None and start.get("parallel") is None
