"""The README's two commands are the ones a new user and CI run; the environments docs/runners.md shows, CI's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO, _wait_for_build


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)


def test_readme_opens_with_the_main_job_and_the_test_command() -> None:
    commands = _readme_commands()
    main, tests = commands[0], commands[1]
    assert "honestscale campaign run examples/digits-campaign.toml" in main
    assert main.startswith("python3 -m venv .venv") and "torch==2.13.0" in main
    assert "honestscale lint --campaign digits-scaling" in main and main.endswith("-o report.pdf")
    assert "pytest" in tests and "mypy" in tests and "ruff check" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci


def test_ci_builds_every_framework_environment_the_docs_show() -> None:
    """docs/runners.md's commands for the framework environments are the ones CI runs."""
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    text = (REPO / "docs" / "runners.md").read_text()
    environments = [
        c
        for c in re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)
        if c.startswith(("python3 -m venv .venv-", "bash scripts/build-"))
    ]
    lines = [line for c in environments for line in c.splitlines()]
    assert len(lines) == 3 and all(line in ci for line in lines)


def test_a_test_waits_for_the_environment_ci_is_building(tmp_path: Path) -> None:
    """.ci/run builds the framework environments beside the tests: a built one lets the test go on, a failed one
    fails it with the build's log, one never asked of CI is not waited for."""
    (tmp_path / "tf.ok").touch()
    _wait_for_build("tensorflow", tmp_path)
    _wait_for_build("torch", tmp_path)  # the main environment: nothing to wait for
    (tmp_path / "hvd.log").write_text("error: command 'cmake' failed\n")
    (tmp_path / "hvd.failed").touch()
    with pytest.raises(pytest.fail.Exception, match=r"(?s)the hvd environment did not build.*cmake' failed"):
        _wait_for_build("horovod-torch", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="the mx environment did not build"):
        _wait_for_build("mxnet", tmp_path, limit_s=0.0)  # never ended: the limit fails it
