"""The architecture's boundaries (orchestrate -> record -> judge), checked rather than hoped for."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "honestscale"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_import_contracts_hold() -> None:
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout


def test_a_forbidden_import_breaks_a_contract(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "honestscale", ignore=shutil.ignore_patterns("__pycache__"))
    world = tmp_path / "honestscale" / "runners" / "_world.py"
    world.write_text(world.read_text() + "\nimport honestscale.store  # a runner reaching into the store\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "honestscale.runners._world -> honestscale.store" in result.stdout


def test_only_the_store_and_the_collector_import_duckdb() -> None:
    allowed = (PACKAGE / "store", PACKAGE / "collector")
    offenders = [
        str(p.relative_to(REPO))
        for p in sorted(PACKAGE.rglob("*.py"))
        if not any(p.is_relative_to(a) for a in allowed)
        and any(m.split(".")[0] == "duckdb" for m in _imports(p))
    ]
    assert offenders == []
