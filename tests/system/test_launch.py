"""The local launcher's refusals: they name what is missing before any rank starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from honestscale.campaign import launch
from tests.conftest import hs


def test_missing_framework_is_named_with_the_install_command(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with pytest.raises(
        launch.LaunchError, match=r"needs torch, sklearn, not installed .* pip install torch==2.13.0"
    ):
        launch.launch("torch", 1, ["--out", str(tmp_path)], "r", python=str(bare / "bin" / "python"))


def test_unknown_framework_and_missing_out(tmp_path: Path) -> None:
    with pytest.raises(launch.LaunchError, match="runners available here: torch"):
        launch.launch("caffe", 1, [], "r")
    result = hs("run", "--framework", "torch", "--workers", "2", "--model", "mlp")
    assert result.returncode == 2 and "needs --out FOLDER" in result.stderr
    assert launch.out_dir(["--model", "mlp", "--out=runs/x"]) == Path("runs/x")
