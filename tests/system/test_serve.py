"""``honestscale serve`` in a real headless browser (Debian's chromium through chromium-driver and Selenium).

The server runs as a user starts it (``honestscale serve`` in its own process) over stores of real runner events
(``examples/digits-ddp``) and real MLPerf logs; the browser loads every page and reports console errors.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, cli, held_store, hs
from tests.lint_campaigns import build
from tests.serving import CHROMIUM, DRIVER, EXAMPLE, Server, chrome, start, stop, visit, wait_for_text
from tests.tools import require

MARKUP = "<img src=http://127.0.0.1:9/x onerror=window.pwned=1>"
SCRIPT = "<script>window.pwned=1</script>"
MATH = r"$\undefinedcmd$"

require(
    CHROMIUM and DRIVER,
    "chromium and chromium-driver",
    "apt-get install chromium chromium-driver",
    module=True,
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chrome("1300,2000")


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory, mlperf: Path) -> Path:
    tmp = tmp_path_factory.mktemp("serve")
    store = tmp / "s.duckdb"
    assert hs("ingest", EXAMPLE, "--store", store).returncode == 0
    assert hs("ingest", mlperf / "DellEMC", "--store", store, "--campaign", "dell-v0.7").returncode == 0
    return store


@pytest.fixture(scope="module")
def served(real_store: Path) -> Iterator[Server]:
    server = start(real_store)
    yield server
    stop(server)


def _ready(server: Server, campaign: str) -> dict[str, Any]:
    """The campaign's analysis model once the server has judged it."""
    status, body, _ = server.get(f"/api/campaigns/{campaign}")
    assert status == 200, body
    return dict(json.loads(body))


def test_every_page_loads_in_a_browser_without_a_console_error(
    served: Server, browser: Any, real_store: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    runs = json.loads(served.get("/api/runs")[1])
    two_workers = next(
        r["run_id"] for r in runs if r["campaign"] == "digits-ddp-example" and r["world_size"] == 2
    )
    pages = ["/", "/campaigns/digits-ddp-example", "/campaigns/dell-v0.7", "/runs", "/runs?framework=torch&workers=2",
             f"/runs/{two_workers}", "/findings", "/findings?campaign=dell-v0.7&outcome=fail"]  # fmt: skip
    for path in pages:
        errors = visit(browser, served.url.rstrip("/") + path, settle=3.0 if "campaigns/" in path else 1.0)
        assert errors == [], (path, errors)
        assert "internal error" not in browser.page_source and browser.find_elements(By.TAG_NAME, "h1"), path
    # the campaign page: the report's figures drawn inline (after the page: waited for, not slept on), each marked
    # point with its hover text
    visit(browser, served.url + "campaigns/digits-ddp-example", settle=0.0)
    # each figure is fetched and inlined on its own: wait for the one whose hover texts are checked, not a count of
    # figures (3 of 5 inlined was once taken for all of them: a race)
    hover = "return Array.from(document.querySelectorAll('g.hs-point > title')).map(t => t.textContent)"

    def timed(b: Any) -> bool:
        return any(
            "worker(s): median time to" in t and "run(s) ok; rules:" in t for t in b.execute_script(hover)
        )

    try:
        WebDriverWait(browser, 120).until(timed)
    except Exception:  # the message names what was there instead
        raise AssertionError(("no time figure's hover text", browser.execute_script(hover))) from None
    assert len(browser.find_elements(By.CSS_SELECTOR, "figure svg.hs-inline")) >= 3
    # the run page: the step-time figure with its stalls, and it zooms
    visit(browser, served.url.rstrip("/") + f"/runs/{two_workers}", settle=1.0)
    timeline = browser.find_element(By.CSS_SELECTOR, "#fig-steps svg")
    box = "return arguments[0].getAttribute('viewBox')"
    before = browser.execute_script(box, timeline)
    assert before
    browser.execute_script(
        "const s=arguments[0], r=s.getBoundingClientRect();"
        "s.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2,"
        " clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));", timeline)  # fmt: skip
    assert browser.execute_script(box, timeline) != before, "the run timeline does not zoom"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#ranks tbody tr")) == 2


def test_the_campaign_page_shows_the_numbers_of_report_json(
    served: Server, browser: Any, real_store: Path
) -> None:
    from selenium.webdriver.common.by import By

    for campaign in ("digits-ddp-example", "dell-v0.7"):
        printed = json.loads(
            cli("report", "--store", real_store, "--campaign", campaign, "--format", "json").stdout
        )
        assert _ready(served, campaign) == printed, campaign
        visit(browser, served.url + f"campaigns/{campaign}", settle=2.0)
        text = browser.find_element(By.CSS_SELECTOR, "#results").text
        for c in [c for c in printed["comparisons"] if c["kind"] == "scaling"]:
            for p in c["points"][1:]:
                for ratio in (p["speedup"], p["throughput_speedup"]):
                    if ratio is not None:
                        assert f"{ratio:.2f}" in text, (campaign, ratio)
            assert str(len(c["runs"])) in browser.find_element(By.CSS_SELECTOR, "p.byline").text
        landed = browser.find_element(By.CSS_SELECTOR, "#runs").text
        assert all(r["run_id"] in landed for r in printed["runs"])


def test_a_campaign_page_reads_whole_at_1400_px(served: Server, browser: Any) -> None:
    """The campaign page at 1,400 px: nothing wider than the window (no table cut mid-word), the exports folded
    under their own heading, every number's verdicts a mark (counts) whose rules' codes are one hover away (its
    title), and each series' codes listed once in full ("Lint on this series")."""
    from selenium.webdriver.common.by import By

    browser.set_window_size(1400, 1000)
    try:
        visit(browser, served.url + "campaigns/dell-v0.7", settle=3.0)
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= 1400, f"the page is {width} px wide at 1,400"
        folded = browser.find_elements(By.CSS_SELECTOR, "details.exports")
        assert len(folded) == 1 and not folded[0].get_attribute("open")
        assert "Tables for a paper" in folded[0].find_element(By.TAG_NAME, "summary").text
        marks = browser.find_elements(By.CSS_SELECTOR, "#summary span.verdicts, #results span.verdicts")
        assert marks, "no verdict marks"
        for mark in marks:
            assert re.fullmatch(r"(✗ \d+|\? \d+|\d+ suppressed)( · (\? \d+|\d+ suppressed))*", mark.text), (
                mark.text
            )
            codes = mark.get_attribute("title")
            counted = sum(int(n) for n in re.findall(r"(\d+)", mark.text))
            assert len(re.findall(r"HS\d{3}", codes)) == counted, (mark.text, codes)
        # no inline style is allowed (nor script), and the page needs none: its console holds no refusal
        status, _, headers = served.get("/campaigns/dell-v0.7")
        policy = {k.lower(): v for k, v in headers.items()}["content-security-policy"]
        assert status == 200 and "style-src 'self';" in policy and "unsafe-inline" not in policy, policy
        summary = browser.find_element(By.CSS_SELECTOR, "#summary").text
        listed = re.findall(r"Lint on this series: [^\n]*?see Lint verdicts", summary)
        rest = re.sub(r"Lint on this series: [^\n]*?see Lint verdicts", "", summary)
        assert listed and not re.search(r"\[rules: [^\]]*HS\d{3}", rest), rest  # marks only, codes on hover
    finally:
        browser.set_window_size(1300, 2000)


def test_downloads_and_hostile_paths(served: Server) -> None:
    status, body, headers = served.get("/campaigns/dell-v0.7/lint.sarif")
    assert status == 200 and json.loads(body)["version"] == "2.1.0"
    assert "script-src 'self'" in headers["content-security-policy"]
    page = served.get("/campaigns/dell-v0.7")[1]
    csvs = re.findall(r'href="(/campaigns/dell-v0.7/files/[^"]+\.(?:csv|tex))"', page)
    assert csvs and all(served.get(p)[0] == 200 for p in csvs)
    status, body, headers = served.get("/campaigns/dell-v0.7/report.pdf")
    assert status == 200 and headers["content-type"] == "application/pdf"
    for path, code in (("/campaigns/dell-v0.7/files/..%2F..%2F..%2Fetc%2Fpasswd", 404), ("/static/..%2F_app.py", 404),
                       ("/campaigns/dell-v0.7/files/report.html", 404), ("/runs/no-such-run", 404),
                       ("/campaigns/dell-v0.8", 404), ("/no/such/page", 404), ("/runs?workers=two", 400),
                       ("/api/runs/no-such-run", 404)):  # fmt: skip
        status, body, _ = served.get(path)
        assert status == code and "Traceback" not in body and "root:" not in body, (path, status, body[:300])
    assert "dell-v0.7" in served.get("/campaigns/dell-v0.8")[1]  # the campaign meant, named
    assert json.loads(served.get("/api/runs/no-such-run")[1])["error"].startswith("no run")


def test_the_cli_works_beside_the_server_and_pages_answer_while_it_writes(served: Server, real_store: Path,
                                                                         tmp_path: Path) -> None:  # fmt: skip
    assert served.get("/")[0] == 200 and served.get("/campaigns/dell-v0.7")[0] == 200
    assert hs("ingest", EXAMPLE, "--store", real_store).returncode == 0
    assert cli("lint", "--store", real_store, "--campaign", "dell-v0.7").returncode in (0, 1)
    made = cli("report", "--store", real_store, "--campaign", "digits-ddp-example", "-o", tmp_path / "r.pdf")
    assert made.returncode == 0, made.stderr
    with held_store(real_store) as held:  # a writer holding the store, as a long ingest does
        for path in ("/", "/campaigns/dell-v0.7", "/api/campaigns"):
            status, body, _ = served.get(path)
            assert status == 200, (path, body[:500])
        assert held.holding()  # answered from what was read before, while the writer still held the store


def test_hostile_names_render_as_text(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    case = {"campaign": MARKUP, "runs": [
        {"id": "a", "workers": 1, "framework": MATH, "campaign": MARKUP, "name": SCRIPT, "ttt": 1000.0, "reps": 2},
        {"id": "b", "workers": 2, "framework": MATH, "campaign": MARKUP, "name": MARKUP, "ttt": 600.0, "reps": 2},
    ]}  # fmt: skip
    store = build(tmp_path, case)
    server = start(store)
    try:
        from urllib.parse import quote

        for path in ("/", f"/campaigns/{quote(MARKUP, safe='')}", "/runs", "/findings"):
            visit(browser, server.url.rstrip("/") + path, settle=2.5)
            assert browser.execute_script("return window.pwned === undefined"), path
            assert browser.find_elements(By.CSS_SELECTOR, 'img[src^="http"]') == [], path
            assert MARKUP in browser.find_element(By.TAG_NAME, "body").text, path
        visit(browser, server.url, settle=1.0)
        wait_for_text(browser, "#campaign-rows a", MARKUP, timeout=10.0)
    finally:
        err = stop(server)
    assert "Traceback" not in err, err[-2000:]


def test_a_campaign_appears_while_its_files_land_in_the_watched_folder(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    watched = tmp_path / "runs"
    watched.mkdir()
    server = start(tmp_path / "new.duckdb", "--watch", str(watched), "--interval", "0.5")
    try:
        visit(browser, server.url, settle=0.5)
        assert browser.find_elements(By.ID, "empty")
        browser.execute_script("window.sameLoad = 42")
        runs = sorted(EXAMPLE.iterdir())
        shutil.copytree(runs[0], watched / runs[0].name)
        wait_for_text(browser, '#campaign-rows tr[data-campaign="digits-ddp-example"] td.landed', "1")
        for run in runs[1:]:
            shutil.copytree(run, watched / run.name)
        wait_for_text(
            browser, '#campaign-rows tr[data-campaign="digits-ddp-example"] td.landed', str(len(runs))
        )
        assert (
            browser.execute_script("return window.sameLoad") == 42
        )  # no reload: the rows followed the store
    finally:
        err = stop(server)
    assert "landed" in err or "new" in err, err


def test_a_missing_or_damaged_store_gives_the_cli_message(tmp_path: Path) -> None:
    missing = hs("serve", "--store", tmp_path / "none.duckdb", "--port", "0")
    assert missing.returncode == 2 and "no store at" in missing.stderr and "Traceback" not in missing.stderr
    damaged = tmp_path / "bad.duckdb"
    damaged.write_bytes(b"not a database" * 100)
    result = hs("serve", "--store", damaged, "--port", "0")
    assert result.returncode == 2 and "not a honestscale store" in result.stderr, result.stderr


def test_the_compare_page_is_the_cli_comparison(tmp_path: Path, browser: Any) -> None:
    store = tmp_path / "c.duckdb"
    assert hs("ingest", REPO / "examples" / "compare" / "runs", "--store", store).returncode == 0
    cli = hs("compare", "compare-base", "compare-confounded", "--factor", "loader_workers", "--store", store,
             "--format", "json")  # fmt: skip
    server = start(store)
    try:
        query = "?a=compare-base&b=compare-confounded&factor=loader_workers"
        status, body, _ = server.get("/api/compare" + query)
        assert status == 200 and json.loads(body) == json.loads(cli.stdout)
        assert visit(browser, server.url + "compare" + query, settle=3) == []
        page = browser.page_source
        assert "Confounds: lr schedule constant → cosine" in page and "harmonic mean of runs" in page
        # the figure inline, every run of both sides a point with its hover text
        assert len(browser.find_elements("css selector", "svg g.hs-point title")) == 24
        ratio = json.loads(cli.stdout)["pairs"][0]["measures"][0]["ratio"]["value"]
        assert f"{ratio:.3g}" in page
        status, body, _ = server.get("/compare?a=compare-bse&b=compare-again")
        assert status == 400 and "did you mean compare-base" in body and "Traceback" not in body
    finally:
        stop(server)
