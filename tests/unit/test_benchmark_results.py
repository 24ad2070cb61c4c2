"""The benchmarks' figures and their history (benchmarks/results.jsonl): the README and docs/benchmarks.md quote the
latest of each, a run says when it got worse than the last by more than the spread, and every recorded line is a
figure with its machine's state."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from benchmarks import _results
from benchmarks._alternate import paired
from benchmarks._results import Figure, Session

REPO = Path(__file__).resolve().parents[2]


def test_every_recorded_line_is_a_figure_with_its_machine() -> None:
    entries = _results.history()
    assert entries, "benchmarks/results.jsonl holds the figures the docs quote"
    for e in entries:
        f = e.figure
        assert math.isfinite(f.value) and f.spread >= 0 and f.better in ("lower", "higher"), e
        assert e.cpus >= 1 and all(x >= 0 for x in (*e.load, *e.load_end)) and e.commit, e


@pytest.mark.parametrize(("name", "brief"), list(_results.QUOTED.items()))
def test_the_docs_quote_the_latest_figures(name: str, brief: bool) -> None:
    text = (REPO / name).read_text(encoding="utf-8")
    assert text == _results.rendered(text, _results.history(), brief), (
        f"{name} does not quote benchmarks/results.jsonl's latest figures: python benchmarks/results.py --write"
    )


def test_the_quoted_table_holds_each_latest_value() -> None:
    """Independently of the renderer: the latest line of each figure, read with json, is in the docs' table."""
    latest: dict[tuple[str, str], dict[str, object]] = {}
    for line in (REPO / "benchmarks" / "results.jsonl").read_text().splitlines():
        raw = json.loads(line)
        latest[(raw["benchmark"], raw["figure"])] = raw
    table = (REPO / "docs" / "benchmarks.md").read_text()
    for (bench, figure), raw in latest.items():
        row = next(r for r in table.splitlines() if r.startswith(f"| `{bench}` | {figure}"))
        shown = re.search(r"\*\*([\d,.]+)", row)
        assert shown, row
        value = float(str(raw["value"]))
        assert math.isclose(float(shown[1].replace(",", "")), value, rel_tol=5e-3, abs_tol=5e-3), (row, value)


def _figure(value: float, spread: float) -> Figure:
    return Figure("bench", "ratio", value, "x", spread, "lower", "<= 2.0")


def test_a_run_says_when_a_figure_is_worse_than_the_last_beyond_the_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    Session("bench").finish([_figure(1.80, 0.05)], record=True, path=results)
    Session("bench").finish([_figure(1.83, 0.05)], record=False, path=results)
    out = capsys.readouterr().out
    assert "last recorded 1.800" in out and "WORSE" not in out, "within the spread: noise"
    Session("bench").finish([_figure(2.10, 0.05)], record=True, path=results)
    assert "WORSE by 0.300" in capsys.readouterr().out
    entries = _results.history(results)
    assert [e.figure.value for e in entries] == [1.80, 2.10], "only --record appends"
    assert entries[-1].cpus >= 1 and len(entries[-1].load) == 3


def test_a_broken_line_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(
        _results.Entry(_figure(1.0, 0.0), "abc", "2026", (0, 0, 0), (0, 0, 0), 2).line() + "\n{\n"
    )
    with pytest.raises(SystemExit, match=r"results.jsonl:2: not a benchmark figure"):
        _results.history(results)


def test_block_pairs_give_the_ratio_its_interval_and_the_cost_a_step() -> None:
    plain = [0.0050, 0.0051, 0.0049, 0.0050, 0.0052, 0.0050]
    instrumented = [p + 50e-6 for p in plain]
    got = paired(plain, instrumented)
    assert got.cost_us == pytest.approx(50.0) and got.cost_low_us == pytest.approx(50.0)
    ratios = sorted(q / p for p, q in zip(plain, instrumented, strict=True))
    assert (
        got.ratio_low >= ratios[0]
        and got.ratio_high <= ratios[-1]
        and got.ratio_low <= got.ratio <= got.ratio_high
    )


@pytest.mark.parametrize(
    ("value", "goal", "said"),
    [(1.9, "<= 2.0 (toward 1.5)", "yes"), (2.0, "<= 2.0", "yes"), (2.1, "<= 2.0", "NO"), (1024, "< 1024 MiB", "NO"),
     (5, "", ""), (0.9, ">= 0.95", "NO")],
)  # fmt: skip
def test_the_tables_say_whether_a_goal_is_met(value: float, goal: str, said: str) -> None:
    assert _results.met(Figure("b", "f", value, "x", 0.0, "lower", goal)) == said


@pytest.mark.parametrize(
    ("name", "value", "spread", "goal", "said"),
    [("ratio", 1.812, 0.262, "<= 2.0", "within its spread"), ("ratio", 1.7, 0.262, "<= 2.0", "yes"),
     ("ratio", 2.1, 0.262, "<= 2.0", "NO"), ("share", 0.92, 0.03, ">= 0.9", "within its spread"),
     ("share", 0.95, 0.03, ">= 0.9", "yes"), ("time", 290.0, 10.0, "< 300 ms", "within its spread"),
     ("step time, upper 95 % bound", 1.018, 0.006, "<= 1.02", "yes"),
     ("step time, upper 95 % bound", 1.023, 0.007, "<= 1.01", "NO")],
)  # fmt: skip
def test_a_goal_met_by_less_than_the_spread_is_said_to_be_within_it(
    name: str, value: float, spread: float, goal: str, said: str
) -> None:
    """The README's "met" column must not say "yes" of a figure whose own rounds straddle the goal (the ingest's
    1.81x ± 0.26 against <= 2.0); an interval's upper bound already carries its uncertainty."""
    assert _results.met(Figure("b", name, value, "x", spread, "lower", goal)) == said


@pytest.mark.parametrize("name", list(_results.QUOTED))
def test_every_row_of_the_quoted_tables_fills_its_columns(name: str) -> None:
    """A row with a cell fewer than its header shifts the date under "met" (the README's did)."""
    block = (REPO / name).read_text(encoding="utf-8").split(_results.BEGIN)[1].split(_results.END)[0]
    rows = [r for r in block.strip().splitlines() if r.startswith("|")]
    # a cell of a row is text between two bars; no figure's text holds a bar
    assert all(r.count("|") == rows[0].count("|") for r in rows), name
