"""A superlinear point the data explains away is not quoted, wherever its number is printed (issue 37, item 4).

Two real situations: NVIDIA's MLPerf v0.7 ResNet-50 submissions on a DGX-1 (8 V100-16GB) and a DGX-2H (16
V100-32GB), one series whose points ran on different accelerators (tests/data/mlperf-v0.7-nvidia, the published
logs); and the README's main job on a busy 2-core machine, where the launcher gave 1 worker 2 threads and each of
2 workers 1, and the 1-worker runs stalled (replayed with the contract's EventWriter: tests/lint_campaigns.py).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, REPO, cli
from tests.lint_campaigns import BUSY, SPEC, build

NVIDIA = REPO / "tests" / "data" / "mlperf-v0.7-nvidia"
DGX = ("different accelerators: NVIDIA V100-SXM2-16GB (300W) on 1xNVIDIA DGX-1 at 8; "
       "NVIDIA V100-SXM3-32GB (450W) on 1xNVIDIA DGX-2H at 16")  # fmt: skip


def _pdf_text(pdf: Path, last: int | None = None) -> str:
    pages = ["-l", str(last)] if last else []
    out = subprocess.run(
        ["pdftotext", *pages, str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    return " ".join(unicodedata.normalize("NFKC", out).split())


def _table(text: str) -> str:
    """A rich table's text with its rules removed: a cell wrapped over rows reads as one line."""
    return " ".join(text.replace("│", " ").split())


def _lint(store: Path) -> tuple[int, str, list[dict[str, Any]]]:
    text = cli("lint", "--store", store)
    found = cli("lint", "--store", store, "-f", "json")
    assert text.returncode == found.returncode, (text.stderr, found.stderr)
    return text.returncode, " ".join(text.stdout.split()), json.loads(found.stdout)


def test_the_nvidia_logs_are_the_published_bytes() -> None:
    rows = [line.split("\t") for line in (NVIDIA / "MANIFEST.tsv").read_text().splitlines()[1:]]
    assert len(rows) == 13
    for name, _repo, commit, blob, size in rows:
        path = NVIDIA / name
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert len(data) == int(size) and commit.startswith("0a8a85a2")
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name


@pytest.fixture(scope="module")
def dgx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("dgx") / "s.duckdb"
    got = cli("ingest", NVIDIA / "training_results_v0.7", "--store", store, "--campaign", "nvidia-v0.7")
    assert got.returncode == 0, got.stdout + got.stderr
    return store


def test_a_series_on_different_accelerators_says_so_on_itself_and_its_speedup_is_not_quoted(
    dgx: Path, tmp_path: Path
) -> None:
    rc, text, findings = _lint(dgx)
    (hs209,) = [f for f in findings if f["code"] == "HS209"]
    assert hs209["outcome"] == "fail" and hs209["severity"] == "error" and hs209["evidence"]["do_not_quote"]
    assert hs209["message"].startswith("do not quote:") and DGX in hs209["message"]
    # lint: the series line says it, and the exit names the rule
    assert (
        rc == 1 and "time to solution scaling, workers [8, 16] points ran on different accelerators" in text
    )
    assert "error-severity finding(s) fail (HS209" in text and "marked do not quote" in text
    # report: on the series (headline and results), beside its speedups, never a point's own score (each is a
    # submission's official number, whatever else the store holds); no law across hardware
    model = json.loads(cli("report", "--store", dgx, "-f", "json").stdout)
    (series,) = [c for c in model["comparisons"] if c["kind"] == "scaling"]
    assert series["hardware_note"] == f"points ran on {DGX}: its speedups mix scale with hardware"
    assert "HS209" in series["points"][1]["ratio_lint"]["error"]
    assert not [p for p in series["points"] if p["lint"]["error"]]
    assert series["fit"] is None and "points ran on different accelerators" in series["law_withheld"]
    pdf = tmp_path / "report.pdf"
    assert cli("report", "--store", dgx, "-o", pdf).returncode == 0
    page1 = _pdf_text(pdf, 1)
    assert (
        "The points ran on different accelerators: NVIDIA V100-SXM2-16GB (300W) on 1xNVIDIA DGX-1 at 8"
        in page1
    )
    headline = page1[page1.index("At 16:") : page1.index("Lint on this series")]
    assert re.search(r"2\.0\dx on the MLPerf olympic mean \(101 % efficiency\)", headline), headline
    assert "do not quote: error-severity HS209 fails" in headline
    text = _pdf_text(pdf)
    tables = text[text.index("Results") :]
    assert tables.count("do not quote") >= 1  # the speedup at 16
    # summary: each point's own numbers, no speedup: unmarked; advise: its ratios marked, no projection across hardware
    assert _table(cli("summary", "--store", dgx).stdout).count("do not quote") == 0
    advice = " ".join(cli("advise", "--store", dgx).stdout.split())
    assert "do not quote: error-severity HS209 fails" in advice
    assert "no projection: the points ran on different accelerators" in advice


def test_the_overview_of_several_campaigns_says_it_on_the_series_line(dgx: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    shutil.copy(dgx, store)
    assert cli("ingest", EXAMPLE, "--store", store, "--campaign", "digits-ddp").returncode == 0
    pdf = tmp_path / "overview.pdf"
    assert cli("report", "--store", store, "-o", pdf).returncode == 0
    text = _pdf_text(pdf)
    line = text[text.index("nvidia-v0.7") :]
    assert "The points ran on different accelerators: NVIDIA V100-SXM2-16GB (300W)" in line
    assert "do not quote: error-severity HS209 fails" in line


def test_a_busy_machines_superlinear_point_with_stalls_and_other_threads_is_not_quoted(
    tmp_path: Path,
) -> None:
    store = build(tmp_path, {"runs": BUSY, "campaign": "digits-scaling", "spec": SPEC})
    assert not [f for f in _lint(store)[2] if f["code"] == "HS213"]  # possible measurements, only badly taken
    rc, text, findings = _lint(store)
    (hs209,) = [f for f in findings if f["code"] == "HS209" and f["outcome"] == "fail"]
    assert hs209["severity"] == "error" and hs209["message"].startswith(
        "do not quote: superlinear at 2 workers"
    )
    for cause in ("slow or stalled base case", "HS210", "threads per worker intra-op 2 → 1",
                  "OMP_NUM_THREADS set by honestscale's launcher", "busier host"):  # fmt: skip
        assert cause in hs209["message"], (cause, hs209["message"])
    # the stalls and the shared host stay warnings of their own; HS209 makes the exit say it
    assert {
        f["severity"] for f in findings if f["code"] in ("HS208", "HS210") and f["outcome"] == "fail"
    } == {"warning"}
    assert rc == 1 and "error-severity finding(s) fail (HS209)" in text
    # the report's headline: the speedup of 2 workers carries "do not quote"
    pdf = tmp_path / "report.pdf"
    assert cli("report", "--store", store, "-o", pdf).returncode == 0
    page1 = _pdf_text(pdf, 1)
    headline = page1[page1.index("At 2:") : page1.index("Lint on this series")]
    assert re.search(r"\d+\.\d+x \[[\d.]+, [\d.]+\] on the median time", headline), headline
    assert "do not quote: error-severity HS209 fails on these runs" in headline
    # summary gives each point's own numbers: HS209 is about the series' speedup, so it marks none of them (it marked
    # both before: a rule about a series marks the series' ratios); the stalls and the shared host, about the runs,
    # stay beside the 1-worker point. advise's "fastest to the target" is a ratio of the two points: marked.
    rows = json.loads(cli("summary", "--store", store, "-f", "json").stdout)
    assert len(rows) == 2 and not [r for r in rows if "HS209" in r["lint"]["fail"]]
    assert {"HS208", "HS210"} <= set(next(r for r in rows if r["workers"] == 1)["lint"]["fail"])
    assert _table(cli("summary", "--store", store).stdout).count("do not quote") == 0
    advice = " ".join(cli("advise", "--store", store).stdout.split())
    assert re.search(r"Fastest to the target .*do not quote: error-severity HS209 fails", advice), advice


def test_the_dashboard_marks_them_on_the_campaign_page(dgx: Path, tmp_path: Path) -> None:
    from tests.serving import start, stop

    store = tmp_path / "s.duckdb"
    shutil.copy(dgx, store)
    server = start(store)
    try:
        status, body, _ = server.get("/api/campaigns/nvidia-v0.7")
        assert status == 200, body
        status, page, _ = server.get("/campaigns/nvidia-v0.7")
    finally:
        stop(server)
    assert status == 200
    words = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "The points ran on different accelerators" in words
    assert "do not quote: error-severity HS209 fails" in words
