"""Names shown as themselves and no machine's paths in what is published (issue 37, items 6 and 7).

A campaign named ``evil\\u202egpj.exe`` (U+202E RIGHT-TO-LEFT OVERRIDE: it reads "evilexe.jpg" where printed as is)
and one of 5,000 characters, landed from the real MLPerf v0.7 logs with ``ingest --campaign``: the terminal, CSV,
JSON, the report and the download name show the override as a visible escape; the dashboard (a real browser)
isolates every name in ``<bdi>`` with the whole name on hover and keeps its tables inside the window. The compare
example's real runner events (their command lines hold the absolute path of the venv's python that ran them), landed
in a store beside their folder as the README's main job lays them out: the PDF, the report's JSON and the dashboard
name event files relative to the store's folder (or ``--path-root``) and the python by its version, never the home
folder; ``show`` still prints the full path the store keeps.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from honestscale.display import file_name, json_text, shown, shown_command, shown_path, shown_text
from tests.conftest import COMPARE_RUNS, REPO, hs
from tests.tools import require

EVIL = "evil\u202egpj.exe"
SHOWN = "evil\\u202egpj.exe"
LONG = "long-name-" * 500
BASE_RUNS = sorted(COMPARE_RUNS.glob("compare-base-*"))
# what the compare example's run_start recorded as its command's interpreter: the clone's venv
VENV_PYTHON = "/work/main/.venv/bin/python3"


def _start_event(run: Path) -> dict[str, Any]:
    with (run / "events-rank0.jsonl").open(encoding="utf-8") as f:
        return dict(json.loads(f.readline()))


def _compact(text: str) -> str:
    """Text without any white space: a path that a PDF's line broke is still found whole."""
    return "".join(text.split())


def _pdf_text(pdf: Path) -> str:
    require(shutil.which("pdftotext"), "poppler-utils (pdftotext)", "apt-get install poppler-utils")
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


# -- the one function every presenter uses ------------------------------------------------------------------------
def test_names_show_their_controls_as_visible_escapes() -> None:
    assert shown(EVIL) == SHOWN and shown("digits-scaling") == "digits-scaling"
    for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\x1b\x00\u2028\ufeff":
        assert ch not in shown(f"a{ch}b") and "\\" in shown(f"a{ch}b"), repr(ch)
    # joiners and right-to-left letters stay as they are
    assert shown("👩\u200d💻 نموذج") == "👩\u200d💻 نموذج"
    assert shown_text("line\none\u2066") == "line\none\\u2066"
    assert file_name(EVIL) == "evil[U+202E]gpj.exe" and "/" not in file_name("../../etc/passwd")
    assert len(file_name(LONG)) == 89 and file_name(LONG) != file_name(LONG + "x")
    doc = json_text(json.dumps({"campaign": EVIL}, ensure_ascii=False))
    assert "\u202e" not in doc and json.loads(doc) == {"campaign": EVIL}


def test_paths_are_shown_relative_never_from_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "alice"
    monkeypatch.setenv("HOME", str(home))
    clone, runs = home / "src" / "clone", home / "src" / "runs"
    assert shown_path(clone / "examples" / "e.jsonl", clone) == "examples/e.jsonl"
    assert shown_path(runs / "r0" / "events-rank0.jsonl", clone) == "../runs/r0/events-rank0.jsonl"
    assert shown_path(home / "data" / "x", tmp_path / "elsewhere") == "~/data/x"
    outside = "/scratch/bob/campaign/r0/events-rank0.jsonl"
    assert shown_path(outside, clone) == "…/campaign/r0/events-rank0.jsonl"
    assert shown_path("runs/r0/events-rank0.jsonl", clone) == "runs/r0/events-rank0.jsonl"
    command = shown_command([VENV_PYTHON, "-m", "honestscale.runners.torch_ddp", "--out", str(runs / "c"),
                             f"--data={home}/data"], clone)  # fmt: skip
    assert command == "python -m honestscale.runners.torch_ddp --out ../runs/c --data=../../data"


# -- the terminal, CSV, JSON and the report's exports: names ------------------------------------------------------
@pytest.fixture(scope="module")
def named_store(tmp_path_factory: pytest.TempPathFactory, mlperf: Path) -> Path:
    """Dell's v0.7 ResNet logs landed as two campaigns: one named with U+202E, one of 5,000 characters."""
    store = tmp_path_factory.mktemp("names") / "names.duckdb"
    results = mlperf / "DellEMC" / "results"
    for folder, name in ((results / "C4140", EVIL), (results / "2xC4140", LONG)):
        got = hs("ingest", folder, "--store", store, "--campaign", name)
        assert got.returncode == 0, got.stderr
    return store


def test_runs_show_and_csv_escape_the_override(named_store: Path, tmp_path: Path) -> None:
    csv = hs("runs", "--store", named_store, "-f", "csv")
    assert csv.returncode == 0 and SHOWN in csv.stdout and "\u202e" not in csv.stdout
    got = hs("runs", "--store", named_store, "-f", "json", "--campaign", EVIL)
    assert got.returncode == 0 and "\u202e" not in got.stdout and SHOWN in got.stdout
    runs = json.loads(got.stdout)
    assert len(runs) == 5 and {r["campaign"] for r in runs} == {EVIL}  # the same name to a program
    shown_run = hs("show", runs[0]["run_id"], "--store", named_store)
    assert shown_run.returncode == 0 and SHOWN in shown_run.stdout and "\u202e" not in shown_run.stdout
    table = hs("summary", "--store", named_store, "--campaign", EVIL)
    assert table.returncode == 0 and "\u202e" not in table.stdout
    weak = ("--factor", "workers", "--factor", "global_batch_size")
    for args in (
        ("compare", EVIL, LONG, *weak),
        ("lint",),
        ("compare", "--history", "model=resnet"),
        ("compare", EVIL, EVIL[:-1]),
    ):  # fmt: skip  (the last: an error naming the close campaign)
        got = hs(*args, "--store", named_store)
        printed = got.stdout + got.stderr
        assert got.returncode in (0, 1, 2, 3) and "\u202e" not in printed and SHOWN in printed, (
            args,
            printed,
        )
    made = hs("report", "--store", named_store, "--campaign", EVIL, "-o", tmp_path / "r.pdf", timeout=300)
    assert made.returncode == 0, made.stderr
    text = _pdf_text(tmp_path / "r.pdf")
    assert "\u202e" not in text and SHOWN in _compact(text)
    for export in (tmp_path / "r_files").iterdir():
        if export.suffix in (".csv", ".tex", ".html"):
            assert "\u202e" not in export.read_text(encoding="utf-8"), export.name


def test_a_long_name_is_printed_whole_once_in_the_pdf(named_store: Path, tmp_path: Path) -> None:
    made = hs("report", "--store", named_store, "--campaign", LONG, "-o", tmp_path / "r.pdf", timeout=300)
    assert made.returncode == 0, made.stderr
    text = _compact(_pdf_text(tmp_path / "r.pdf")).replace(
        "-", ""
    )  # pdftotext drops a hyphen where a line breaks
    # the title and the lines that name it cut it short, saying how much is left out
    assert text.count(LONG.replace("-", "")) == 1
    assert "4,880morecharacters" in text and len(LONG) == 5000
    pages = subprocess.run(["pdfinfo", str(tmp_path / "r.pdf")], capture_output=True, text=True).stdout
    assert int(next(line.split()[-1] for line in pages.splitlines() if line.startswith("Pages:"))) <= 6


# -- the report: paths ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clone_layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The README's main job's layout inside a home folder: the store in the clone, the runs beside it."""
    home = tmp_path_factory.mktemp("home")
    clone, runs = home / "clone", home / "runs"
    clone.mkdir()
    for run in BASE_RUNS:
        shutil.copytree(run, runs / run.name)
    store = clone / "honestscale.duckdb"
    got = hs("ingest", runs, "--store", store, env={"HOME": str(home)})
    assert got.returncode == 0, got.stderr
    return {"home": home, "clone": clone, "runs": runs, "store": store}


def test_the_pdf_names_no_machine_path(clone_layout: dict[str, Path], tmp_path: Path) -> None:
    start = _start_event(BASE_RUNS[0])
    assert start["command"][0] == VENV_PYTHON  # the events hold the clone's absolute python path
    python = f"Python {start['software']['python']}"
    home, store = clone_layout["home"], clone_layout["store"]
    made = hs("report", "--store", store, "--campaign", "compare-base", "-o", tmp_path / "r.pdf",
              env={"HOME": str(home)}, timeout=300)  # fmt: skip
    assert made.returncode == 0, made.stderr
    text = _compact(_pdf_text(tmp_path / "r.pdf"))
    for machine in (VENV_PYTHON, str(REPO), str(home), str(tmp_path), "/root/", "/home/"):
        assert _compact(machine) not in text, machine
    assert _compact(python) in text and "python-mhonestscale.runners.torch_ddp" in text
    assert all(f"../runs/{run.name}/events-rank0.jsonl" in text for run in BASE_RUNS)
    model = hs(
        "report", "--store", store, "--campaign", "compare-base", "-f", "json", env={"HOME": str(home)}
    )
    assert model.returncode == 0 and str(home) not in model.stdout and VENV_PYTHON not in model.stdout
    repro = json.loads(model.stdout)["reproducibility"]
    assert (
        repro["python"] == [python]
        and repro["sources"][0] == f"../runs/{BASE_RUNS[0].name}/events-rank0.jsonl"
    )
    assert repro["commands"][0]["command"].startswith("python -m honestscale.runners.torch_ddp ")
    rooted = hs("report", "--store", store, "--campaign", "compare-base", "-f", "json", "--path-root", home)
    assert (
        json.loads(rooted.stdout)["reproducibility"]["sources"][0]
        == f"runs/{BASE_RUNS[0].name}/events-rank0.jsonl"
    )
    # the store keeps the whole path: show prints it
    full = json.loads(hs("show", start["run_id"], "--store", store, "-f", "json").stdout)
    assert full["source_file"] == str(clone_layout["runs"] / start["run_id"] / "events-rank0.jsonl")


# -- the dashboard, in a real browser ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dashboard(named_store: Path, clone_layout: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[Any]:  # fmt: skip
    from tests.serving import CHROMIUM, DRIVER, start, stop

    require(CHROMIUM and DRIVER, "chromium and chromium-driver", "apt-get install chromium chromium-driver")
    store = clone_layout["clone"] / "dashboard.duckdb"
    shutil.copy(named_store, store)
    got = hs("ingest", clone_layout["runs"], "--store", store)
    assert got.returncode == 0, got.stderr
    server = start(store, env={"HOME": str(clone_layout["home"])})
    yield server
    err = stop(server)
    assert "Traceback" not in err, err[-2000:]


@pytest.fixture(scope="module")
def page(dashboard: Any) -> Iterator[Any]:
    from tests.serving import chrome

    yield from chrome("1300,1000")


NAMES = """return Array.from(document.querySelectorAll(arguments[0])).map(e => ({
  title: e.title, text: e.innerText, width: e.getBoundingClientRect().width,
  isolated: e.tagName === "BDI" || e.closest("[dir=auto]") !== null}));"""
FITS = "return [document.documentElement.scrollWidth, window.innerWidth];"


def _fits(browser: Any, where: str) -> None:
    wide, window = browser.execute_script(FITS)
    assert wide <= window, f"{where}: the page is {wide} px wide in a {window} px window"


def test_the_dashboard_isolates_names_and_fits_the_window(dashboard: Any, page: Any) -> None:
    from tests.serving import visit, wait_for_text

    base = dashboard.url.rstrip("/")
    visit(page, base + "/", settle=1.0)
    css_name = SHOWN.replace("\\", "\\\\")  # a backslash escapes in a CSS string
    wait_for_text(page, f'#campaign-rows tr[data-campaign="{css_name}"] td.landed', "5", timeout=60)
    names = {n["title"]: n for n in page.execute_script(NAMES, "#campaign-rows td.name bdi.name")}
    assert names[SHOWN]["isolated"] and names[SHOWN]["text"] == SHOWN  # the override, isolated and visible
    assert (
        names[LONG]["isolated"] and names[LONG]["width"] < 400
    )  # the whole name on hover, cut short on screen
    assert "\u202e" not in page.page_source
    _fits(page, "/")
    for path in ("/runs", f"/runs?campaign={quote(EVIL, safe='')}", "/findings",
                 f"/campaigns/{quote(EVIL, safe='')}", f"/campaigns/{quote(LONG, safe='')}"):  # fmt: skip
        visit(page, base + path, settle=2.0)
        assert "internal error" not in page.page_source, path
        _fits(page, path)
        assert "\u202e" not in page.find_element("tag name", "body").text, path
    visit(page, f"{base}/runs?campaign={quote(EVIL, safe='')}", settle=1.0)  # the filter still finds the name
    assert page.find_element("id", "count").text.startswith("5 of")
    visit(page, f"{base}/campaigns/{quote(EVIL, safe='')}", settle=1.0)
    heading = page.execute_script(NAMES, "h1 bdi.name")
    assert heading and heading[0]["isolated"] and heading[0]["title"] == SHOWN
    # the report's download name: the override escaped, never decoded into the saved file's name
    status, _, headers = dashboard.get(f"/campaigns/{quote(EVIL, safe='')}/report.pdf")
    disposition = headers["content-disposition"]
    saved = unquote(disposition.split("filename*=utf-8''", 1)[-1])  # the name a browser saves the file under
    assert status == 200 and saved == "report-evil[U+202E]gpj.exe.pdf", disposition
    assert "%E2%80%AE" not in disposition.upper()


def test_the_dashboard_names_no_machine_path_and_wraps_commands(
    dashboard: Any, page: Any, clone_layout: dict[str, Path]
) -> None:
    from tests.serving import visit

    base = dashboard.url.rstrip("/")
    visit(page, base + "/campaigns/compare-base#repro", settle=3.0)
    body = page.find_element("tag name", "body").text
    for machine in (VENV_PYTHON, str(REPO), str(clone_layout["home"])):
        assert machine not in body and machine not in page.page_source, machine
    assert (
        f"../runs/{BASE_RUNS[0].name}/events-rank0.jsonl" in body and "python -m honestscale.runners" in body
    )
    _fits(page, "/campaigns/compare-base")
    wrapped = page.execute_script(
        "return Array.from(document.querySelectorAll('pre')).map(e => e.scrollWidth <= e.clientWidth)"
    )
    assert wrapped and all(wrapped)  # the command lines wrap inside the page
    run = BASE_RUNS[0].name
    visit(page, f"{base}/runs/{quote(run, safe='')}", settle=2.0)
    body = page.find_element("tag name", "body").text
    assert f"../runs/{run}/events-rank0.jsonl" in body and str(clone_layout["home"]) not in body
