"""The dashboard's campaign page in process (no browser, no server process): it is shown from the report's plan at
once, its figures are drawn after it when their files are asked for, and what the plan names is what is drawn."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from typer.testing import CliRunner

from honestscale.cli import app
from honestscale.serve._access import Access
from honestscale.serve._app import Dashboard
from honestscale.serve._state import State
from tests.conftest import EXAMPLE, cli

CAMPAIGN = "digits-ddp-example"


def _request(path: str, **params: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "path_params": params, "query_string": b"",
                    "headers": [], "scheme": "http", "server": ("127.0.0.1", 80)})  # fmt: skip


def _dashboard(tmp_path: Path) -> Dashboard:
    store = tmp_path / "s.duckdb"
    landed = CliRunner().invoke(app, ["--store", str(store), "ingest", str(EXAMPLE), "-q"])
    assert landed.exit_code == 0, landed.output
    work = tmp_path / "work"
    work.mkdir()
    return Dashboard(State(store, work), Access(None, ["127.0.0.1"]), None)


def test_the_campaign_page_is_shown_before_its_figures_are_drawn(tmp_path: Path) -> None:
    dashboard = _dashboard(tmp_path)
    page: Any = dashboard.campaign(_request(f"/campaigns/{CAMPAIGN}", name=CAMPAIGN))
    html = page.body.decode()
    entry = dashboard.state.cached(CAMPAIGN)
    assert page.status_code == 200 and entry is not None
    assert entry.page is None, "the page request drew the figures: they belong after the page"
    assert "the figures are drawn after this page" in html
    shown = re.findall(rf'src="/campaigns/{CAMPAIGN}/files/([^"]+\.svg)"', html)
    assert len(shown) >= 3, html[:2000]

    # the first figure asked for draws them all; every file the page names is then there, and nothing else is
    figure: Any = dashboard.campaign_file(_request("/files", name=CAMPAIGN, file=shown[0]))
    after = dashboard.state.cached(CAMPAIGN)
    assert after is entry
    outputs = after.page
    assert figure.status_code == 200 and outputs is not None
    drawn = sorted(p.name for p in outputs.exports)
    assert drawn == sorted(dashboard.state.contents(entry).exports)
    assert all((outputs.assets / name).is_file() for name in drawn)
    assert {f"{f['name']}.svg" for v in outputs.scaling for f in v.figures} == set(shown)
    linked = re.findall(rf'href="/campaigns/{CAMPAIGN}/files/([^"]+)"', html)
    assert linked and set(linked) <= set(drawn)

    # the page shown after the drawing is the same page, with the time the drawing took
    again = bytes(dashboard.campaign(_request(f"/campaigns/{CAMPAIGN}", name=CAMPAIGN)).body).decode()
    assert "the figures are drawn after this page" not in again and "(figures and exports)" in again
    assert re.findall(rf'src="/campaigns/{CAMPAIGN}/files/([^"]+\.svg)"', again) == shown


def test_off_loopback_only_a_token_serve_made_is_taken(tmp_path: Path) -> None:
    """Strings that pass every test of length and alphabet but are chosen, not drawn (a passphrase, a repeated
    pattern, a long word list) are refused off loopback, with the command that makes a token; a token
    `serve --make-token` printed is taken there, and one character of it changed is not. On loopback the chosen
    strings stay usable (nobody else reaches the server)."""
    from honestscale.errors import HonestscaleError
    from honestscale.serve._access import check_token, made_here

    chosen = [
        "correcthorsebatterystaple",
        "abcdefgh" * 4,
        "Tr0ub4dor&3-Tr0ub4dor&3-Tr0ub4dor&3",
        STRONG_CHOSEN,
    ]
    for token in chosen:
        check_token(token, shared=False)
        with pytest.raises(HonestscaleError) as refused:
            check_token(token, shared=True)
        assert "was not made by serve" in refused.value.message and "serve --make-token" in str(
            refused.value.fix
        )
    got = cli("serve", "--make-token")
    made = got.stdout.strip()
    assert got.returncode == 0 and made.startswith("hs_") and made_here(made)
    check_token(made, shared=True)
    flipped = made[:10] + ("A" if made[10] != "A" else "B") + made[11:]
    assert not made_here(flipped)
    with pytest.raises(HonestscaleError):
        check_token(flipped, shared=True)


STRONG_CHOSEN = (
    "Yq3v9Lr0bX2mTz7KpA4sWn"  # random-looking, 132 bits by its alphabet, but typed in, not made here
)


def test_the_claims_page_judges_the_files_again_as_runs_land(tmp_path: Path) -> None:
    from honestscale.claims import load
    from tests.conftest import COMPARE_RUNS, REPO

    store = tmp_path / "s.duckdb"
    assert cli("ingest", EXAMPLE, "--store", store).returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    claims = load(REPO / "examples" / "claims" / "compare.toml")
    dashboard = Dashboard(State(store, work), Access(None, ["127.0.0.1"]), None, [claims])
    before: Any = dashboard.claims.api(_request("/api/claims"))
    (file,) = json.loads(before.body)["files"]
    got = {c["id"]: c["verdict"] for c in file["claims"]}
    assert got["one-loader-faster"] == "cannot verify" and file["exit_code"] == 3  # its runs have not landed
    assert cli("ingest", COMPARE_RUNS, "--store", store).returncode == 0
    page: Any = dashboard.claims.page(_request("/claims"))
    html = page.body.decode()
    row = html[html.index("one-loader-faster") - 300 : html.index("one-loader-faster") + 1500]
    assert "<strong>supported</strong>" in row and "95 % interval [1.654, 3.697]; n = 6" in row, row
    assert "(exit code 1)" in html and 'href="/claims"' in html
    after: Any = dashboard.claims.api(_request("/api/claims"))
    assert json.loads(after.body)["files"][0]["exit_code"] == 1
