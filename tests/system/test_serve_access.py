"""Who may read ``honestscale serve``: the Host allow-list, the token, the session cookie it buys, TLS.

Servers run as a user starts them (``honestscale serve`` in its own process, as in tests/system/test_serve.py); the browser
is Debian's chromium, told to resolve ``evil.example`` and ``dash.example`` to 127.0.0.1 (what DNS rebinding makes a
victim's browser do) and to accept the test's self-signed certificate.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import hs
from tests.serving import (
    CHROMIUM,
    DRIVER,
    EXAMPLE,
    Server,
    chrome,
    start,
    stop,
    visit,
    wait_for_text,
)
from tests.tools import require

require(
    CHROMIUM and DRIVER,
    "chromium and chromium-driver",
    "apt-get install chromium chromium-driver",
    module=True,
)

STRONG = "Yq3v9Lr0bX2mTz7KpA4sWn"  # 22 url-safe characters: 132 bits


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chrome("1200,900", "--ignore-certificate-errors",
                      "--host-resolver-rules=MAP evil.example 127.0.0.1, MAP dash.example 127.0.0.1",
                      page_timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("access") / "s.duckdb"
    assert hs("ingest", EXAMPLE, "--store", path).returncode == 0
    return path


@pytest.fixture(scope="module")
def loopback(store: Path) -> Iterator[Server]:
    server = start(store)
    yield server
    stop(server)


def _port(server: Server) -> int:
    found = re.search(r":(\d+)/", server.url)
    assert found
    return int(found.group(1))


@pytest.fixture(scope="module")
def shared(store: Path) -> Iterator[tuple[Server, str, str]]:
    """Off loopback without a token: serve makes one and prints its link."""
    server = start(store, "--host", "0.0.0.0", "--allow-host", "dash.example")
    assert server.proc.stderr is not None
    line = server.proc.stderr.readline()
    found = re.search(r"(http://\S+/\?token=(\S+))", line)
    assert found, line
    yield server, found.group(2), found.group(1)
    stop(server)


@pytest.fixture(scope="module")
def tls(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """HTTPS with a self-signed certificate for 127.0.0.1 made here by openssl, and a token."""
    require(shutil.which("openssl"), "openssl", "apt-get install openssl")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)  # fmt: skip
    server = start(store, "--certfile", str(cert), "--keyfile", str(key), "--token", STRONG)
    assert server.url.startswith("https://127.0.0.1:"), server.url
    yield server, cert
    stop(server)


def _raw(port: int, path: str, headers: dict[str, str], host: str | None) -> tuple[int, str, dict[str, str]]:
    """A request with the Host header forged (or left out), as curl -H 'Host: ...' sends it. Asked again when the
    server answers 503 with Retry-After (its pages wait 1 s for the store, then say so: on a loaded machine another
    page's read can hold it longer), as a client that honours the header does; anything else is the answer."""
    for _ in range(40):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        response = conn.getresponse()
        body = response.read().decode(errors="replace")
        conn.close()
        got = {k.lower(): v for k, v in response.getheaders()}
        if response.status != 503 or "retry-after" not in got:
            break
        time.sleep(float(got["retry-after"]))
    return response.status, body, got


def test_a_forged_host_is_refused_on_loopback(loopback: Server, browser: Any) -> None:
    port = _port(loopback)
    status, body, _ = _raw(port, "/api/runs", {}, "evil.example")
    assert status == 421 and "--allow-host" in body and "run_id" not in body, body[:500]
    status, body, _ = _raw(port, "/", {}, f"evil.example:{port}")
    assert status == 421 and "evil.example" in body and "digits-ddp-example" not in body
    assert _raw(port, "/", {}, None)[0] == 400  # no Host at all
    for name in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
        status, body, _ = _raw(port, "/api/runs", {}, name)
        assert status == 200 and "digits-ddp-example" in body, (name, status, body[:300])
    # the browser of a page whose name resolves to 127.0.0.1 (DNS rebinding): nothing of the store
    visit(browser, f"http://evil.example:{port}/runs", settle=0.5)
    text = browser.find_element("tag name", "body").text
    assert "421" in text and "--allow-host" in text and "digits-ddp-example" not in text, text[:500]
    visit(browser, f"http://localhost:{port}/runs", settle=0.5)
    assert "digits-ddp-example" in browser.find_element("tag name", "body").text


def test_the_findings_page_refuses_unknown_filters_as_the_runs_page_does(loopback: Server) -> None:
    for path in ("/runs?workers=two", "/findings?code=HS999&outcome=banana", "/findings?code=HS999",
                 "/findings?outcome=banana", "/findings?severity=fatal", "/findings?suppressed=maybe",
                 "/api/findings?outcome=banana"):  # fmt: skip
        status, body, _ = loopback.get(path)
        assert status == 400 and "Traceback" not in body, (path, status, body[:300])
    assert (
        "banana" in loopback.get("/findings?outcome=banana")[1]
        and "cannot_verify" in loopback.get("/findings?outcome=banana")[1]
    )
    assert json.loads(loopback.get("/api/findings?code=HS999")[1])["error"].startswith("code='HS999'")
    for path in ("/findings?code=HS101&outcome=fail&severity=error", "/findings?outcome=cannot_verify&suppressed=yes",
                 "/findings?code=&outcome="):  # fmt: skip
        assert loopback.get(path)[0] == 200, path


def test_weak_tokens_and_wildcard_hosts_are_refused_at_start(store: Path) -> None:
    for token in (
        "a",
        "s3cret-token",
        "0123456789abcdef0123456789abcde",
        "a" * 64,
        "correct horse battery staple",
    ):
        result = hs("serve", "--store", store, "--port", "0", "--token", token)
        assert result.returncode == 2 and "the token" in result.stderr and "serve --make-token" in result.stderr, (
            token, result.stderr)  # fmt: skip
    result = hs(
        "serve", "--store", store, "--port", "0", "--host", "0.0.0.0", env={"HONESTSCALE_TOKEN": "hunter2"}
    )
    assert result.returncode == 2 and "too weak" in result.stderr and "128" in result.stderr
    result = hs("serve", "--store", store, "--port", "0", "--allow-host", "*")
    assert result.returncode == 2 and "DNS rebinding" in result.stderr
    result = hs("serve", "--store", store, "--port", "0", "--certfile", store)
    assert result.returncode == 2 and "cannot serve TLS" in result.stderr and "Traceback" not in result.stderr


def test_off_loopback_a_token_is_made_printed_and_needed(shared: tuple[Server, str, str]) -> None:
    server, token, link = shared
    assert len(token) >= 43 and link.endswith(f"/?token={token}")
    status, body, headers = server.get("/")
    assert status == 401 and "token" in body and headers.get("www-authenticate") == "Bearer"
    assert "digits-ddp-example" not in body
    assert server.get("/api/runs", {"Authorization": "Bearer " + token[:-1] + "x"})[0] == 401
    assert server.get("/api/runs?token=" + token[:-1])[0] == 401
    status, body, _ = server.get("/api/runs", {"Authorization": f"Bearer {token}"})
    assert status == 200 and "digits-ddp-example" in body
    # a forged session cookie is no session
    assert server.get("/api/runs", {"Cookie": "honestscale_session=1.2.3"})[0] == 401


def test_a_proxy_name_on_loopback_needs_a_token_too(store: Path) -> None:
    """--allow-host means others reach the server through a proxy: a token is made, with the proxy's link."""
    server = start(store, "--allow-host", "dash.example")
    try:
        assert server.proc.stderr is not None
        found = re.search(r"https://dash\.example/\?token=(\S+)", server.proc.stderr.readline())
        assert found
        port = _port(server)
        assert _raw(port, "/api/runs", {}, "dash.example")[0] == 401
        status, body, _ = _raw(
            port, "/api/runs", {"Authorization": f"Bearer {found.group(1)}"}, "dash.example"
        )
        assert status == 200 and "digits-ddp-example" in body
    finally:
        stop(server)


def test_the_token_link_becomes_a_session_and_leaves_the_address(
    shared: tuple[Server, str, str], browser: Any
) -> None:
    server, token, _ = shared
    port = _port(server)
    browser.delete_all_cookies()
    # a link with other parameters: they stay, the token goes
    visit(browser, f"http://127.0.0.1:{port}/runs?framework=torch&token={token}&workers=2", settle=0.5)
    assert browser.current_url == f"http://127.0.0.1:{port}/runs?framework=torch&workers=2", (
        browser.current_url
    )
    assert "digits-ddp-example" in browser.find_element("tag name", "body").text
    (cookie,) = browser.get_cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"], cookie
    assert token not in cookie["value"] and token[:8] not in cookie["value"]
    assert browser.execute_script("return document.cookie") == ""  # no script reads it
    # the session goes on without the token, every page and the live updates' requests
    errors = visit(browser, f"http://127.0.0.1:{port}/", settle=3.0)
    assert errors == [] and "token" not in browser.current_url
    assert browser.find_elements("css selector", '#campaign-rows tr[data-campaign="digits-ddp-example"]')
    # the same cookie from a plain client works; changed by one character, it does not
    value = cookie["value"]
    assert server.get("/api/runs", {"Cookie": f"honestscale_session={value}"})[0] == 200
    forged = value[:-1] + ("0" if value[-1] != "0" else "1")
    status, body, _ = server.get("/api/runs", {"Cookie": f"honestscale_session={forged}"})
    assert status == 401 and "session has ended" in body
    # behind a proxy's name (--allow-host dash.example), the same link
    browser.delete_all_cookies()
    visit(browser, f"http://dash.example:{port}/findings?token={token}", settle=0.5)
    assert browser.current_url == f"http://dash.example:{port}/findings"
    assert browser.find_element("tag name", "h1").text == "Findings"


def test_a_token_link_followed_from_another_site_signs_in(
    shared: tuple[Server, str, str], browser: Any
) -> None:
    """A link in a mail or a chat: the navigation comes from another site, and a SameSite=Strict cookie set on its
    way would not go with a redirect of it; the server moves the browser on from its own page instead."""
    server, token, _ = shared
    port = _port(server)
    browser.delete_all_cookies()
    target = f"http://127.0.0.1:{port}/runs?workers=2&token={token}"
    browser.get("data:text/html," + quote(f'<a id="go" href="{target}">the dashboard</a>'))
    browser.find_element("id", "go").click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and browser.current_url != f"http://127.0.0.1:{port}/runs?workers=2":
        time.sleep(0.2)
    assert browser.current_url == f"http://127.0.0.1:{port}/runs?workers=2", browser.current_url
    wait_for_text(browser, "h1", "Runs")
    assert "digits-ddp-example" in browser.find_element("tag name", "body").text


def test_over_tls_the_session_cookie_is_secure(tls: tuple[Server, Path], browser: Any) -> None:
    server, cert = tls
    port = _port(server)
    context = ssl.create_default_context(cafile=str(cert))

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), NoRedirect)
    try:
        opener.open(f"https://127.0.0.1:{port}/runs?token={STRONG}", timeout=60)
        raise AssertionError("no redirect")
    except urllib.error.HTTPError as exc:
        assert exc.code == 303 and exc.headers["Location"] == "/runs"
        set_cookie = exc.headers["Set-Cookie"]
    assert (
        set_cookie.startswith("__Host-honestscale_session=")
        and "Secure" in set_cookie
        and STRONG not in set_cookie
    )
    assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie and "Path=/" in set_cookie
    with urllib.request.urlopen(urllib.request.Request(f"https://127.0.0.1:{port}/api/runs", headers={
            "Authorization": f"Bearer {STRONG}"}), context=context, timeout=60) as response:  # fmt: skip
        assert response.status == 200
    # plain HTTP on the TLS port is no way in
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        _raw(port, "/api/runs", {"Authorization": f"Bearer {STRONG}"}, f"127.0.0.1:{port}")
    # the real browser: signed in over https, the cookie Secure
    browser.delete_all_cookies()
    visit(browser, f"https://127.0.0.1:{port}/?token={STRONG}", settle=1.0)
    assert browser.current_url == f"https://127.0.0.1:{port}/"
    (cookie,) = browser.get_cookies()
    assert cookie["secure"] and cookie["httpOnly"] and cookie["name"] == "__Host-honestscale_session"
    visit(browser, f"https://127.0.0.1:{port}/runs", settle=0.5)
    assert "digits-ddp-example" in browser.find_element("tag name", "body").text
