"""Helpers of the tests that serve a store and drive a browser: ``honestscale serve`` in its own process
(``start``, ``stop``, ``Server``) and a headless Chromium (``chrome``, ``visit``, ``wait_for_text``).

Debian's chromium and chromium-driver through Selenium; where they are missing the tests that need them skip,
except in CI, where ``.ci/run`` installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits-ddp"


class Server:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc, self.url = proc, url

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
        request = urllib.request.Request(self.url.rstrip("/") + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.read().decode(errors="replace"), dict(response.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace"), dict(exc.headers)


def start(store: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """``honestscale serve --port 0`` in its own process; returns once it answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "honestscale", "serve", "--store", str(store), "--port", "0", *args],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"(https?://\S+/)", line)
    assert found, line + proc.stderr.read()
    url = found.group(1).replace("0.0.0.0", "127.0.0.1")
    return Server(proc, url)


def stop(server: Server) -> str:
    server.proc.terminate()
    try:
        _, err = server.proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        _, err = server.proc.communicate()
    return err


def chrome(window: str, *flags: str, page_timeout: float = 180) -> Iterator[Any]:
    """A headless Chromium driven by selenium (Debian's chromium and chromedriver), its console kept; quit after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={window}", *flags):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    driver.set_page_load_timeout(page_timeout)
    yield driver
    driver.quit()


def visit(browser: Any, url: str, settle: float = 1.5) -> list[str]:
    """Load the page; the console's errors (and warnings about refused content) while it settles."""
    browser.get("about:blank")  # the page before stops polling its (perhaps stopped) server ...
    browser.get_log("browser")  # ... and what it said is read and dropped, not blamed on this page
    browser.get(url)
    time.sleep(settle)
    return [e["message"] for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def wait_for_text(browser: Any, css: str, text: str, timeout: float = 60.0) -> None:
    """Wait until the first element matching `css` reads `text`.

    The text is read inside the page in one script call: the live update replaces the rows, so an element found
    by one WebDriver call may be gone by the next (a stale element)."""
    read = "const e = document.querySelector(arguments[0]); return e === null ? null : e.textContent.trim();"
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = browser.execute_script(read, css)
        if seen == text:
            return
        time.sleep(0.3)
    raise AssertionError(f"{css} never read {text!r}: it read {seen!r}")
