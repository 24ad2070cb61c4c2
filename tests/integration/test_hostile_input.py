"""Hostile input ends in a clear message, never a traceback (issue 18): names are data, never code (mathtext,
formulas, markup and LaTeX go through every output as text), and a line nested too deeply is a quarantined line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from honestscale.spreadsheet import defuse
from tests.conftest import cli
from tests.lint_campaigns import build

MATH = r"$\undefinedcmd$"
FORMULA = '=HYPERLINK("http://evil","x")'
MARKUP = "<img src=http://127.0.0.1:9/x>"


def test_a_spreadsheet_cell_never_becomes_a_formula() -> None:
    assert defuse("=1+1") == "'=1+1" and defuse("@SUM(A1)") == "'@SUM(A1)" and defuse("+cmd") == "'+cmd"
    assert defuse("-cmd|' /C calc'!A0") == "'-cmd|' /C calc'!A0" and defuse("\tx") == "'\tx"
    assert defuse("-0.5") == "-0.5" and defuse("+3") == "+3" and defuse("resnet") == "resnet"


def test_hostile_names_pass_through_every_output_as_text(tmp_path: Path) -> None:
    case = {"campaign": FORMULA, "runs": [
        {"id": "a", "workers": 1, "framework": MATH, "campaign": FORMULA, "name": MARKUP, "ttt": 1000.0, "reps": 2},
        {"id": "b", "workers": 1, "framework": FORMULA, "campaign": FORMULA, "name": MATH, "ttt": 900.0, "reps": 2},
        {"id": "c", "workers": 2, "framework": MATH, "campaign": FORMULA, "name": MARKUP, "ttt": 600.0, "reps": 2},
    ]}  # fmt: skip
    store = build(tmp_path, case)
    pdf, html = tmp_path / "r.pdf", tmp_path / "r.html"
    made = cli("report", "--store", store, "-o", pdf, "--html", html)
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr[-3000:]
    files = tmp_path / "r_files"
    svgs = "".join(p.read_text() for p in files.glob("*.svg"))
    assert MATH in svgs or MATH.replace("<", "&lt;") in svgs  # the framework's name, drawn as written
    page = html.read_text()
    assert "<img src=http://127.0.0.1" not in page and "&lt;img src=http://127.0.0.1:9/x&gt;" in page
    for path in files.glob("*.csv"):
        for row in csv.reader(io.StringIO(path.read_text())):
            assert not any(cell.startswith(("=", "@")) for cell in row), (path.name, row)
    runs_csv = list(csv.reader(io.StringIO(cli("runs", "--store", store, "-f", "csv").stdout)))
    assert runs_csv[1:] and all(not cell.startswith("=") for row in runs_csv for cell in row)
    assert any(cell == "'" + FORMULA for row in runs_csv for cell in row)
    tex = "".join(p.read_text() for p in files.glob("*.tex"))
    assert r"\$\textbackslash{}undefinedcmd\$" in tex and MATH not in tex
    sarif = cli("lint", "--store", store, "-f", "sarif")
    assert sarif.returncode in (0, 1) and json.loads(sarif.stdout)["version"] == "2.1.0"
    shown = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert {r["framework"] for r in shown} == {MATH, FORMULA} and {r["campaign"] for r in shown} == {FORMULA}


def test_deeply_nested_json_is_a_quarantined_line_not_a_recursion_error(tmp_path: Path) -> None:
    from tests.runs import write_run

    (path, *_) = write_run(tmp_path / "ev", "deep", world=1)
    deep = (
        '{"schema":1,"run_id":"deep","rank":0,"seq":999,"time":2.0,"kind":"eval","x":'
        + "[" * 100_000
        + "]" * 100_000
        + "}"
    )
    with path.open("a") as fh:
        fh.write(deep + "\n")
    mllog = tmp_path / "mlperf" / "result_0.txt"
    mllog.parent.mkdir()
    mllog.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "x", "value": '
                     + "[" * 100_000 + "]" * 100_000 + "}\n")  # fmt: skip
    store = tmp_path / "s.duckdb"
    got = cli("ingest", tmp_path / "ev", mllog, "--store", store)
    assert got.returncode == 3 and "Traceback" not in got.stderr and "RecursionError" not in got.stderr, (
        got.stderr
    )
    reasons = [q["reason"] for q in json.loads(cli("quarantine", "--store", store, "-f", "json").stdout)]
    assert any("deeper than the contract's 64" in r and "not an event line" in r for r in reasons), reasons
    assert any("MLLOG line is JSON nested too deeply" in r for r in reasons), reasons
    runs = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert [r["status"] for r in runs if r["run_id"] == "deep"] == ["success"]  # the run's good lines landed


def test_a_truncated_or_corrupted_store_is_named_damaged_with_the_way_out(tmp_path: Path) -> None:
    import os

    from tests.conftest import EXAMPLE

    good = tmp_path / "good.duckdb"
    assert cli("ingest", EXAMPLE, "--store", good).returncode == 0
    size = good.stat().st_size
    truncated = tmp_path / "truncated.duckdb"
    truncated.write_bytes(good.read_bytes()[: size // 40])
    corrupted = tmp_path / "corrupted.duckdb"  # opens; a query then reads blocks that fail their checksum
    data = bytearray(good.read_bytes())
    for off in range(1 << 20, size - 300_000, 1 << 16):
        data[off + 100 : off + 3100] = os.urandom(3000)
    corrupted.write_bytes(bytes(data))
    for store in (truncated, corrupted):
        for command in (("runs",), ("report", "-o", str(tmp_path / "x.pdf")), ("lint",)):
            got = cli(*command, "--store", store)
            assert got.returncode == 2, (store.name, command, got.stderr[-2000:])
            assert "damaged" in got.stderr and "ingest the event files again" in got.stderr
            assert "Traceback" not in got.stderr, got.stderr[-2000:]
