"""Every shell command the manual shows on the committed examples and data runs, with the exit code and the figures
its comment promises (`# exit 1: 2.42x slower [1.65, 3.70]`: the code, and each number in the output). Commands
chained by `&&` run as a shell runs them: every one before the last must succeed. A command whose subject is
training, a server or another machine runs in the system test named for it in ELSEWHERE."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO, cli
from tests.tools import require

DOCS = REPO / "docs"
SHARED = REPO.parent / "shared"
# command (as the page shows it, up to its first option) -> the test that runs it, and why not here
ELSEWHERE = {
    "honestscale probe --model examples/byo/mycnn.py:build": "tests/system/test_advise.py (trains, on Slurm too)",
    "honestscale campaign run examples/frameworks-campaign.toml": "tests/system/test_frameworks_campaign.py (trains)",
    "honestscale lint --campaign frameworks": "tests/system/test_frameworks_campaign.py (after the campaign)",
    "honestscale report --campaign frameworks": "tests/system/test_frameworks_campaign.py (after the campaign)",
    "honestscale advise --campaign probe-mycnn-build": "tests/system/test_advise.py (after the probe)",
    "honestscale serve": "tests/system/test_serve.py, test_serve_access.py (a server)",
    "honestscale --data-path": "tests/system/test_store_tiers.py (PostgreSQL)",
}


def _blocks() -> list[tuple[str, list[list[str]]]]:
    """Each bash block that runs honestscale, as (page, its lines, each the commands its `&&` chains), in order."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for block in re.findall(r"```bash\n(.+?)\n```", page.read_text(), flags=re.S):
            lines = [line.strip() for line in block.splitlines()]
            chains = [
                [c.strip() for c in line.split("&&")]
                for line in lines
                if re.match(r"(\.venv/bin/)?honestscale ", line)
            ]
            if chains:
                found.append((page.name, chains))
    return found


def _elsewhere(command: str) -> str | None:
    bare = command.removeprefix(".venv/bin/")
    return next((why for start, why in ELSEWHERE.items() if bare.startswith(start)), None)


BLOCKS = _blocks()
HERE = [(page, lines) for page, lines in BLOCKS if not any(_elsewhere(c) for chain in lines for c in chain)]


def test_every_docs_command_runs_here_or_in_a_named_system_test() -> None:
    assert len(HERE) >= 3, HERE
    for page, lines in BLOCKS:
        elsewhere = [c for chain in lines for c in chain if _elsewhere(c)]
        if elsewhere:  # a block is run whole, here or there
            assert len(elsewhere) == sum(map(len, lines)), f"docs/{page}: a block half run here: {lines}"
        for command in elsewhere:
            assert (REPO / str(_elsewhere(command)).split(" ")[0].rstrip(",")).exists(), command


@pytest.mark.parametrize(("page", "lines"), HERE, ids=[f"{p}:{c[0][0][:60]}" for p, c in HERE])
def test_the_commands_run_as_the_page_says(
    page: str, lines: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("examples", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    for chain in lines:
        _run(page, chain, tmp_path)


def _run(page: str, chain: list[str], tmp_path: Path) -> None:
    for i, command in enumerate(chain):
        text, _, comment = command.partition("#")
        args = [a.replace("../shared", str(SHARED)) for a in shlex.split(text)[1:]]
        if any(str(SHARED) in a for a in args):
            require(SHARED.exists(), "../shared", "../shared beside the repository")
        done = cli(*args, env={"HONESTSCALE_STORE": str(tmp_path / "honestscale.duckdb")})
        said = re.match(r"\s*exit (\d+)(?::(.*))?", comment)
        expected = int(said.group(1)) if said else 0
        where = f"docs/{page}: {command}"
        assert done.returncode == expected or (i < len(chain) - 1 and done.returncode == 0), (
            f"{where}\nexit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
        for figure in re.findall(r"\d+(?:\.\d+)?", said.group(2) or "") if said else []:
            assert figure in done.stdout + done.stderr, (
                f"{where}: the comment's {figure} is not in the output"
            )
