"""Bring your own model: a user's single-device file trained distributed, and every bad file refused by name
before any worker starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, cli, hs

GOOD = REPO / "examples" / "byo" / "mycnn.py"


def test_user_cnn_trains_on_two_workers_as_one_run(tmp_path: Path, store: Path) -> None:
    from honestscale.runners.usermodel import call, factory

    out = tmp_path / "runs"
    result = hs("run", "--framework", "torch", "--workers", "2", "--model", f"{GOOD}:build", "--dataset", "digits",
                "--epochs", "3", "--out", out, "--ingest", "--store", store, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert (
        run["status"] == "success"
        and run["world_size"] == 2
        and run["n_accelerators"] == 0  # on CPU: no accelerator
        and run["run_id"].startswith("mycnn-build-2w-")
    )
    shown = json.loads(cli("show", run["run_id"], "--store", store, "-f", "json").stdout)
    path, func, fn = factory(f"{GOOD}:build")
    expected = sum(
        p.numel() for p in call(fn, path, func, input_shape=(1, 8, 8), num_classes=10).parameters()
    )
    assert shown["model"] == "mycnn:build" and shown["model_params"] == expected
    assert {e["split"] for e in shown["evals"]} == {"train", "validation", "test"}


BAD = {
    "raises on import": (
        "import torch\nraise RuntimeError('no GPU here')\n",
        ["line 2", "RuntimeError: no GPU here"],
    ),
    "missing factory": (
        "from torch import nn\ndef make(input_shape, num_classes):\n    return nn.Flatten()\n",
        ["no function 'build'", "functions there: make"],
    ),
    "wrong type": (
        "def build(input_shape, num_classes):\n    return {'layers': 3}\n",
        ["build() returned dict, not a torch.nn.Module"],
    ),
    "output does not fit the labels": (
        "from torch import nn\ndef build(input_shape, num_classes):\n    return nn.Sequential(nn.Flatten(), nn.Linear(64, 3))\n",
        ["outputs shape (2, 3)", "10 classes", "end the model with 10 outputs"],
    ),
    "input does not fit the data": (
        "from torch import nn\ndef build():\n    return nn.Sequential(nn.Flatten(), nn.Linear(100, 10))\n",
        ["fails on a batch of shape (2, 1, 8, 8)", "input_shape is passed to build"],
    ),
    "unknown required argument": (
        "from torch import nn\ndef build(depth):\n    return nn.Flatten()\n",
        ["build() needs depth", "give them defaults"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_model_file_is_refused_before_any_worker(tmp_path: Path, case: str) -> None:
    text, expected = BAD[case]
    model = tmp_path / "model.py"
    model.write_text(text)
    out = tmp_path / "runs"
    result = hs("run", "--framework", "torch", "--workers", "2", "--model", f"{model}:build", "--dataset", "digits",
                "--epochs", "1", "--out", out)  # fmt: skip
    assert result.returncode == 2, result.stderr
    message = " ".join(result.stderr.split())
    assert str(model) in message and "fix" in message
    for part in expected:
        assert part in message, (part, message)
    assert not out.exists() or not any(out.iterdir())  # no worker started, no event written


def test_missing_file_is_refused(tmp_path: Path) -> None:
    result = hs("run", "--framework", "torch", "--workers", "2", "--model", f"{tmp_path / 'nope.py'}:build",
                "--out", tmp_path / "runs")  # fmt: skip
    assert result.returncode == 2 and "no such file" in result.stderr
