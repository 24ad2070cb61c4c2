"""The scaling report: numbers from the real MLPerf logs, the PDF, the paper exports, and its safety."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from honestscale.report._model import median_ci, mlperf_score
from honestscale.report._render import AssetFetcher
from tests.conftest import cli
from tests.lint_campaigns import build, case_runs
from tests.tools import require

require(shutil.which("pdftotext"), "poppler-utils (pdftotext)", "apt-get install poppler-utils", module=True)


def _ttt(log: Path) -> float:
    recs = [
        json.loads(line.split(":::MLLOG", 1)[1])
        for line in log.read_text().splitlines()
        if ":::MLLOG" in line
    ]
    start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
    stop = next(r["time_ms"] for r in recs if r["key"] == "run_stop")
    return float(stop - start) / 1000.0


@pytest.fixture(scope="module")
def dell(mlperf: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("report")
    store = tmp / "s.duckdb"
    assert cli("ingest", mlperf / "DellEMC", "--store", store).returncode == 0
    pdf = tmp / "report.pdf"
    result = cli("report", "--store", store, "-o", pdf, "--html", tmp / "report.html")
    assert result.returncode == 0, result.stderr
    return store, pdf


def test_mlperf_scores_and_speedups_match_the_logs(mlperf: Path, dell: tuple[Path, Path]) -> None:
    store, _ = dell
    model = json.loads(cli("report", "--store", store, "--format", "json").stdout)
    (series,) = [c for c in model["comparisons"] if c["kind"] == "scaling"]
    assert (
        series["mode"] == "time_to_solution"
        and series["metric"] == "MLPerf olympic mean"
        and series["base_workers"] == 4
    )
    expected = {}
    for system, workers in (("C4140", 4), ("2xC4140", 8), ("4xC4140", 16)):
        times = sorted(
            _ttt(p) for p in (mlperf / "DellEMC" / "results" / system / "resnet").glob("result_*.txt")
        )
        expected[workers] = sum(times[1:-1]) / 3  # MLPerf: drop the best and the worst, mean of the rest
    points = {p["workers"]: p for p in series["points"]}
    for workers, score in expected.items():
        assert points[workers]["mlperf_score_s"] == pytest.approx(score, rel=1e-6)
    assert [round(expected[w] / 60, 1) for w in (4, 8, 16)] == [154.0, 76.6, 39.9]
    assert (
        points[8]["speedup"] == pytest.approx(expected[4] / expected[8])
        and round(points[8]["speedup"], 2) == 2.01
    )
    assert round(points[16]["speedup"], 2) == 3.86
    assert points[16]["efficiency"] == pytest.approx(points[16]["speedup"] * 4 / 16)
    # 5 runs a point support no interval (6 do): the 8-worker efficiency (1.006) cannot be told from the ideal, so
    # HS209 cannot verify it, and no law is fitted through a point above the ideal that no law reaches
    assert points[8]["efficiency_ci"] == [None, None] and "HS209" in points[8]["ratio_lint"]["cannot_verify"]
    assert series["fit"] is None and "HS209 cannot verify" in series["law_withheld"]
    assert model["lint"]["verdicts"] and {v["code"] for v in model["lint"]["verdicts"]} >= {"HS102", "HS111"}
    assert model["totals"]["runs"] == 15
    # three worker counts: a time predicted at twice the largest, from a model chosen among them, not to be quoted
    (ahead,) = series["predictions"]
    assert ahead["at"] == 32 and ahead["statistic"] == "median of runs" and ahead["value"] is not None
    assert not ahead["quote"] and any("fitted to 3 worker counts" in r for r in ahead["reasons"])
    assert ahead["low"] <= ahead["value"] <= ahead["high"]


def test_pdf_shows_the_numbers_and_renders_as_pages(dell: tuple[Path, Path], tmp_path: Path) -> None:
    _, pdf = dell
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    for needle in ("154.0", "76.6", "39.9", "2.01", "3.86", "Time to solution", "as MLPerf does", "Base case: 4 worker(s)", "HS102",
                   "Lint verdicts", "All runs", "Reproducibility", "Page 2 of", "Predicted beyond the series",
                   "do not quote"):  # fmt: skip
        assert needle in text, needle
    subprocess.run(["pdftoppm", "-png", "-r", "40", str(pdf), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) >= 5
    exports = pdf.with_name("report_files")
    for pattern in (
        "fig1-speedup.pdf",
        "fig1-speedup.svg",
        "fig1-time.pdf",
        "table1-*.csv",
        "table1-*.tex",
        "runs.csv",
    ):
        assert list(exports.glob(pattern)), pattern
    for copy in exports.glob("*.pdf"):  # saved by a second process (report/_copies.py): whole, fonts embedded
        fonts = subprocess.run(["pdffonts", str(copy)], capture_output=True, text=True, check=True).stdout
        assert (
            all("TrueType" in f and " yes yes " in f for f in fonts.splitlines()[2:])
            and "DejaVuSans" in fonts
        )
    words = subprocess.run(
        ["pdftotext", str(exports / "fig1-speedup.pdf"), "-"], capture_output=True, text=True
    )
    assert "workers" in words.stdout and "ideal" in words.stdout
    tex = next(exports.glob("table1-*.tex")).read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    svg = (exports / "fig1-speedup.svg").read_text()
    assert "<svg" in svg and "<image" not in svg  # vector, not a bitmap
    html = pdf.with_name("report.html").read_text()
    assert 'href="report_files/report.css"' in html


def test_median_ci_and_mlperf_score() -> None:
    assert median_ci([1, 2, 3, 4, 5]) == (None, None)  # 5 runs: no 95 % interval
    assert median_ci([float(x) for x in range(1, 21)]) == (6.0, 15.0)
    assert mlperf_score([10.0, 12.0, 11.0, None, 13.0]) == pytest.approx(
        12.0
    )  # aborted = infinite, dropped as worst
    assert mlperf_score([10.0, None, None, 11.0, 12.0]) is None  # two aborted: the mean is infinite


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Counter.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Any:
    _Counter.hits = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()


def test_hostile_names_are_text_and_fetch_nothing(tmp_path: Path, server: Any) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    hostile = f'<img src="{url}/name.png"></style><link rel=stylesheet href="{url}/x.css">'
    case = {"change": {"finals": {"name": hostile, "system": f"<img src={url}/sys.png>",
                                  "cpu": "</style><style>@import url(" + url + "/i.css);</style>"}}}  # fmt: skip
    store = build(tmp_path, case | {"runs": case_runs(case)})
    pdf = tmp_path / "r.pdf"
    result = cli("report", "--store", store, "-o", pdf, "--html", tmp_path / "r.html")
    assert result.returncode == 0, result.stderr
    assert _Counter.hits == []
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "<img src=" in text  # shown as text
    html = (tmp_path / "r.html").read_text()
    assert "&lt;img src=" in html and f'<img src="{url}' not in html


def test_the_fetcher_refuses_what_the_default_would_fetch(tmp_path: Path, server: Any) -> None:
    from weasyprint import HTML

    url = f"http://127.0.0.1:{server.server_address[1]}/probe.png"
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"\x89PNG")
    assets = tmp_path / "assets"
    assets.mkdir()
    page = f'<p>x</p><img src="{url}"><img src="{outside.as_uri()}">'
    HTML(string=page).write_pdf(str(tmp_path / "control.pdf"))
    assert _Counter.hits, "control: without the fetcher WeasyPrint does fetch (so this test can fail)"
    _Counter.hits = []
    fetcher = AssetFetcher(assets)
    HTML(string=page, base_url=str(assets) + "/", url_fetcher=fetcher).write_pdf(str(tmp_path / "safe.pdf"))
    assert _Counter.hits == [] and len(fetcher.refused) == 2


def test_a_figure_copy_that_cannot_be_written_fails_the_report(tmp_path: Path) -> None:
    """The figures' PDF copies are saved by a second process; its errors come back, they are not lost there."""
    import matplotlib.pyplot as plt

    from honestscale.report._copies import PaperCopies
    from honestscale.report._figures import STYLE

    copies = PaperCopies()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2])
    copies.save(fig, tmp_path / "fine.pdf", STYLE)
    copies.save(fig, tmp_path / "no-such-folder" / "lost.pdf", STYLE)
    with pytest.raises(FileNotFoundError):
        copies.wait()
    assert (tmp_path / "fine.pdf").stat().st_size > 1000
    plt.close(fig)


def test_ctrl_c_pressed_while_the_copies_process_forks_stops_the_report(tmp_path: Path) -> None:
    """Python's at-fork handlers swallow a KeyboardInterrupt raised in them; the key must still stop the report."""
    require(
        (os.cpu_count() or 1) >= 2, "a second CPU core (the copies are saved aside only with one)", "2 cores"
    )
    import signal

    import matplotlib.pyplot as plt

    from honestscale.report._copies import PaperCopies
    from honestscale.report._figures import STYLE

    armed = [True]

    def press_ctrl_c_in_the_fork() -> None:  # registered for good, so it fires once
        if armed:
            armed.clear()
            os.kill(os.getpid(), signal.SIGINT)

    os.register_at_fork(after_in_parent=press_ctrl_c_in_the_fork)
    copies = PaperCopies()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2])
    # as in a terminal: pytest started in the background (`cmd &` in a script) inherits Ctrl-C ignored
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            copies.save(fig, tmp_path / "a.pdf", STYLE)
        assert not armed, "the copies were not saved by a forked process"
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a process that ignores Ctrl-C goes on ignoring it
        armed.append(True)
        copies.abandon()
        copies.save(fig, tmp_path / "b.pdf", STYLE)
        copies.wait()
        assert not armed and (tmp_path / "b.pdf").stat().st_size > 1000
    finally:
        signal.signal(signal.SIGINT, before)
        copies.abandon()
        plt.close(fig)
