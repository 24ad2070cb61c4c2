"""Tools a test may need that a machine may lack (a framework environment, Slurm, PostgreSQL, Chromium, poppler, an
optional Python package, ../shared's data): one way to ask for them, :func:`require` (and :func:`module` for a
package). Nothing else in tests/ skips: a skip is failed in CI (``CI=true``), where ``.ci/run`` installs every tool,
and the suite's skips are counted there (tests/conftest.py fails a CI run that skipped anything)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(present: object, tool: str, install: str, *, module: bool = False) -> None:
    """A test that needs a tool this machine may lack: skipped where ``tool`` is missing, failed in CI (``CI=true``),
    where ``.ci/run`` installs every tool (``install`` says how). ``module=True`` at a test module's top level."""
    if present:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{tool} must be there in CI ({install}; .ci/run does it)", pytrace=False)
    pytest.skip(f"{tool} is not there: {install}", allow_module_level=module)


def module(name: str, install: str = "pip install -e '.[dev,torch]'", *, top: bool = False) -> ModuleType:
    """The optional package ``name``, imported; a test without it is skipped, or failed in CI (:func:`require`).
    ``top=True`` at a test module's top level."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = str(exc)
    require(False, f"the Python package {name} ({missing})", install, module=top)
    raise AssertionError("not reached: require skipped or failed")


def not_in_ci_skipped(skipped: list[str]) -> str | None:
    """What a CI run says when tests were skipped (None: none were, or this is not CI)."""
    if os.environ.get("CI") != "true" or not skipped:
        return None
    shown = "\n".join(f"  {s}" for s in skipped[:20]) + (
        f"\n  ... and {len(skipped) - 20} more" if len(skipped) > 20 else ""
    )
    return (f"{len(skipped)} test(s) skipped under CI=true, where every tool is installed and nothing may skip "
            f"(tests/tools.py require):\n{shown}")  # fmt: skip
