"""Tools a test may need that a machine may lack (a framework environment, Slurm, PostgreSQL, Chromium, poppler):
one way to ask for them."""

from __future__ import annotations

import os

import pytest


def require(present: object, tool: str, install: str, *, module: bool = False) -> None:
    """A test that needs a tool this machine may lack: skipped where ``tool`` is missing, failed in CI (``CI=true``),
    where ``.ci/run`` installs every tool (``install`` says how). ``module=True`` at a test module's top level."""
    if present:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{tool} must be there in CI ({install}; .ci/run does it)", pytrace=False)
    pytest.skip(f"{tool} is not there: {install}", allow_module_level=module)
