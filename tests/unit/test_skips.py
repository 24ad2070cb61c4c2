"""Skips that cannot hide: every optional tool is asked for through tests/tools.py (``require``, ``module``), which
fails under ``CI=true``, and a CI run that skipped anything fails (the count in tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

# the ways pytest skips a test, other than through tests/tools.py
BARE = re.compile(r"pytest\.skip\(|importorskip|skipif|mark\.skip\b")


def test_no_test_skips_but_through_require() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        if path.name not in ("tools.py", "test_skips.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BARE.search(line)
    ]
    assert not found, (
        "skip through tests/tools.py require(...) or module(...), which fail in CI:\n" + "\n".join(found)
    )


def _suite(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    """A small suite run with the project's conftest as a plugin: one test passes, one skips as pytest would, one
    asks for a package no machine has."""
    (tmp_path / "test_small.py").write_text(
        "import pytest\n"
        "from tests.tools import module\n"
        "def test_passes():\n    assert True\n"
        "def test_skips():\n    pytest.skip('no such tool here')\n"
        "def test_needs():\n    module('no_such_package_anywhere')\n"
        "@pytest.mark.xfail(strict=True)\ndef test_known_bug():\n    assert False\n"
    )
    env = (
        {k: v for k, v in os.environ.items() if k != "CI"}
        | {"PYTHONPATH": str(REPO)}
        | ({"CI": "true"} if ci else {})
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest", "-p", "no:xdist",
         "--rootdir", str(tmp_path), str(tmp_path / "test_small.py")],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_a_skip_fails_the_run_under_ci(tmp_path: Path) -> None:
    done = _suite(tmp_path, ci=True)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert (
        "1 test(s) skipped under CI=true" in out and "test_small.py::test_skips: no such tool here" in out
    ), out
    assert "the Python package no_such_package_anywhere" in out and "must be there in CI" in out, out
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed" in out, out


def test_elsewhere_a_missing_tool_skips(tmp_path: Path) -> None:
    done = _suite(tmp_path, ci=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed, 2 skipped, 1 xfailed" in out and "skipped under CI=true" not in out, out


def test_a_skip_alone_fails_the_run_under_ci_through_xdist(tmp_path: Path) -> None:
    """Only a pass and a skip, on an xdist worker as CI runs the suite: the count alone turns exit 0 into 1."""
    (tmp_path / "test_only_skip.py").write_text(
        "import pytest\ndef test_passes():\n    assert True\ndef test_skips():\n    pytest.skip('no such tool here')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(REPO), "CI": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest", "-n", "1",
         "--rootdir", str(tmp_path), str(tmp_path / "test_only_skip.py")],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "1 passed, 1 skipped" in out, out
    assert (
        "1 test(s) skipped under CI=true" in out and "test_only_skip.py::test_skips: no such tool here" in out
    ), out
