"""MXNet 1.9.1 (retired) for real: Gluon on 2 workers through the kvstore dist_sync, in its own environment.

The environment is .venv-mx (or $HONESTSCALE_MX_PYTHON: mxnet==1.9.1 with numpy<1.24); .ci/run builds it, so in
CI a missing one fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import framework_python, hs, query, two_worker_run


@pytest.fixture(scope="module")
def mx_python() -> str:
    return framework_python("mxnet")


def test_mxnet_two_workers_land_as_one_run(tmp_path: Path, store: Path, mx_python: str) -> None:
    shown, _ = two_worker_run(tmp_path, store, "mxnet")
    assert shown["framework_version"] == "1.9.1" and shown["backend"] == "ps"
    assert shown["launcher"] == "local" and shown["input_shape"] == [1, 8, 8]
    # the kvstore push/pull is measured on both workers; MXNet's parameter count matches the PyTorch MLP's
    per_rank = query(
        store, "SELECT rank, bool_and(comm_measured), sum(t_comm) FROM steps GROUP BY rank ORDER BY rank"
    )
    assert [r[0] for r in per_rank] == [0, 1] and all(r[1] and r[2] > 0 for r in per_rank)
    assert shown["model_params"] == 64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10
    # the scheduler and server the workers started are gone with them
    left = subprocess.run(
        ["pgrep", "-f", "DMLC_ROLE|import mxnet"], capture_output=True, text=True, check=False
    )
    assert left.stdout.strip() == ""


def test_environment_without_mxnet_names_the_one_command(tmp_path: Path) -> None:
    result = hs("run", "--framework", "mxnet", "--workers", "2", "--out", tmp_path,
                env={"HONESTSCALE_MX_PYTHON": sys.executable})  # fmt: skip
    assert result.returncode == 2
    assert "mxnet" in result.stderr and "numpy<1.24" in result.stderr


def test_mxnet_stops_on_the_shared_loops_sample_budget(tmp_path: Path, store: Path, mx_python: str) -> None:
    """MXNet trains through the loop every PyTorch runner shares: --max-samples stops it at the step that spends
    the budget (counted over both workers), run_start says so, and evaluations follow --eval-every."""
    out = tmp_path / "runs"
    result = hs("run", "--framework", "mxnet", "--workers", "2", "--model", "mlp", "--dataset", "digits",
                "--epochs", "50", "--max-samples", "1000", "--eval-every", "5", "--out", out, "--run-id", "mx-budget",
                "--ingest", "--store", store, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert query(store, "SELECT stop_criterion, stop_value FROM runs") == [("samples", 1000.0)]
    # 64 samples a global batch: the 16th step spends the budget (1,024 samples), on both ranks alike
    assert query(store, "SELECT rank, count(*), sum(samples) FROM steps GROUP BY rank ORDER BY rank") == [
        (0, 16, 512),
        (1, 16, 512),
    ]
    # 19 steps an epoch: the budget ends the first epoch, and the last epoch is evaluated
    evals = query(store, "SELECT split, epoch FROM evals ORDER BY split")
    assert evals == [("test", 0), ("train", 0), ("validation", 0)], evals
