"""The README's two commands are the ones a new user and CI run."""

from __future__ import annotations

import re

from tests.conftest import REPO


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


def test_ci_builds_every_framework_environment_the_readme_shows() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    environments = [
        c for c in _readme_commands() if c.startswith(("python3 -m venv .venv-", "bash scripts/build-"))
    ]
    lines = [line for c in environments for line in c.splitlines()]
    assert len(lines) == 3 and all(line in ci for line in lines)


def test_the_readme_names_the_contract_version_the_runners_write() -> None:
    """Prose that states a version reads it from the code: the README's `"schema": N` is events.SCHEMA_VERSION, and
    it says what each version up to it added."""
    from honestscale.events import SCHEMA_VERSION, VERSIONS

    text = (REPO / "README.md").read_text()
    assert re.findall(r'versioned by `"schema": (\d+)`', text) == [str(SCHEMA_VERSION)]
    said = text[text.index('versioned by `"schema"') :][:600]
    assert all(f"{v} " in said for v in VERSIONS if v > 1), said
