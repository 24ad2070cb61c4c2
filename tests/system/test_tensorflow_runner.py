"""The TensorFlow/Keras runner for real: 2 workers under MultiWorkerMirroredStrategy, in its own environment.

The environment is .venv-tf (or $HONESTSCALE_TF_PYTHON); .ci/run builds it, so in CI a missing one fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli, framework_python, hs, two_worker_run


@pytest.fixture(scope="module")
def tf_python() -> str:
    return framework_python("tensorflow")


def test_tensorflow_two_workers_land_as_one_run(tmp_path: Path, store: Path, tf_python: str) -> None:
    # one run, 2 workers, test-split evals, every step's parts summing to its total, digits split as in PyTorch
    shown, _ = two_worker_run(tmp_path, store, "tensorflow")
    assert shown["backend"] == "grpc" and shown["launcher"] == "local" and shown["input_shape"] == [1, 8, 8]


def test_missing_environment_names_the_one_command(tmp_path: Path) -> None:
    env = {"HONESTSCALE_TF_PYTHON": str(tmp_path / "nope" / "python")}
    result = hs("run", "--framework", "tensorflow", "--workers", "1", "--out", tmp_path, env=env)
    assert result.returncode == 2 and "cannot run" in result.stderr


def test_resnet18_on_a_memmap_dataset_matches_the_pytorch_model(
    tmp_path: Path, store: Path, tf_python: str
) -> None:
    import numpy as np

    from honestscale.runners._torch_data import build_model
    from honestscale.runners.data import digits_arrays

    data = tmp_path / "digits-npy"
    data.mkdir()
    for split, (x, y) in digits_arrays().items():
        np.save(data / f"{split}_x.npy", x)
        np.save(data / f"{split}_y.npy", y)
    out = tmp_path / "runs"
    result = hs("run", "--framework", "tensorflow", "--workers", "2", "--model", "resnet18", "--dataset", "memmap",
                "--data-path", data, "--epochs", "1", "--out", out, "--run-id", "tf-resnet", "--ingest", "--store",
                store, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    shown = json.loads(cli("show", "tf-resnet", "--store", store, "-f", "json").stdout)
    assert shown["status"] == "success" and shown["data_source"] == "filesystem"
    assert shown["data_path"] == str(data) and shown["input_shape"] == [1, 8, 8]
    # the same architecture as the PyTorch runner's ResNet-18: the same number of trainable parameters
    torch_params = sum(
        p.numel() for p in build_model("resnet18", (1, 8, 8), 10).parameters() if p.requires_grad
    )
    assert shown["model_params"] == torch_params


def test_fit_stops_where_the_shared_loops_budget_says(tmp_path: Path, store: Path, tf_python: str) -> None:
    """Keras keeps fit; its callback asks the shared loop's Budget when the sample budget is spent and when to
    evaluate, and a missed target ends the run as the loop's check says (exit 3, the run recorded as aborted)."""
    from tests.conftest import query

    out = tmp_path / "runs"
    spent = hs("run", "--framework", "tensorflow", "--workers", "1", "--model", "mlp", "--dataset", "digits",
               "--epochs", "50", "--max-samples", "1000", "--eval-every", "5", "--out", out, "--run-id", "tf-budget",
               "--ingest", "--store", store, timeout=600)  # fmt: skip
    assert spent.returncode == 0, spent.stdout[-3000:] + spent.stderr[-3000:]
    assert query(store, "SELECT stop_criterion, stop_value FROM runs") == [("samples", 1000.0)]
    assert query(store, "SELECT count(*), sum(samples) FROM steps") == [(16, 1024)]  # the 16th step spends it
    assert query(store, "SELECT split, epoch FROM evals ORDER BY split") == [
        ("test", 0),
        ("train", 0),
        ("validation", 0),
    ]
    missed = hs("run", "--framework", "tensorflow", "--workers", "1", "--model", "mlp", "--dataset", "digits",
                "--epochs", "1", "--target-accuracy", "0.999", "--out", out, "--run-id", "tf-missed", "--ingest",
                "--store", store, timeout=600)  # fmt: skip
    assert missed.returncode == 3, missed.stderr[-3000:]
    assert "validation accuracy never reached 0.999 in 1 epochs" in missed.stdout + missed.stderr
    assert query(store, "SELECT status FROM runs WHERE run_id = 'tf-missed'") == [("aborted",)]
