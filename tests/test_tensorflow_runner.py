"""The TensorFlow/Keras runner for real: 2 workers under MultiWorkerMirroredStrategy, in its own environment.

The environment is .venv-tf (or $HONESTSCALE_TF_PYTHON); .ci/run builds it, so in CI a missing one fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import framework_python, hs, query


@pytest.fixture(scope="module")
def tf_python() -> str:
    return framework_python("tensorflow")


def test_tensorflow_two_workers_land_as_one_run(tmp_path: Path, store: Path, tf_python: str) -> None:
    out = tmp_path / "runs"
    result = hs("run", "--framework", "tensorflow", "--workers", "2", "--model", "mlp", "--dataset", "digits",
                "--epochs", "3", "--out", out, "--ingest", "--store", store, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = json.loads(hs("runs", "--store", store, "-f", "json").stdout)
    assert run["status"] == "success" and run["framework"] == "tensorflow" and run["n_accelerators"] == 2
    assert run["framework_version"] and run["final_accuracy"]["split"] == "test"
    assert run["final_accuracy"]["value"] > 0.8
    shown = json.loads(hs("show", run["run_id"], "--store", store, "-f", "json").stdout)
    assert shown["backend"] == "grpc" and shown["launcher"] == "local" and shown["input_shape"] == [1, 8, 8]
    assert {e["split"] for e in shown["evals"]} == {"train", "validation", "test"}
    assert [s["rank"] for s in shown["step_breakdown"]] == [0, 1]
    parts = query(store, "SELECT t_data + t_compute + t_comm + t_optimizer, t_total FROM steps")
    assert parts and all(abs(p - t) <= 0.05 * t for p, t in parts)
    # the same digits split as the PyTorch runner: comparable in one campaign
    assert (shown["train_size"], shown["validation_size"], shown["test_size"]) == (1257, 270, 270)


def test_missing_environment_names_the_one_command(tmp_path: Path) -> None:
    env = {"HONESTSCALE_TF_PYTHON": str(tmp_path / "nope" / "python")}
    result = hs("run", "--framework", "tensorflow", "--workers", "1", "--out", tmp_path, env=env)
    assert result.returncode == 2 and "cannot run" in result.stderr


def test_resnet18_on_a_memmap_dataset_matches_the_pytorch_model(
    tmp_path: Path, store: Path, tf_python: str
) -> None:
    import numpy as np

    from honestscale.runners._data import digits_arrays
    from honestscale.runners._torch_data import build_model

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
    shown = json.loads(hs("show", "tf-resnet", "--store", store, "-f", "json").stdout)
    assert shown["status"] == "success" and shown["data_source"] == "filesystem"
    assert shown["data_path"] == str(data) and shown["input_shape"] == [1, 8, 8]
    # the same architecture as the PyTorch runner's ResNet-18: the same number of trainable parameters
    torch_params = sum(
        p.numel() for p in build_model("resnet18", (1, 8, 8), 10).parameters() if p.requires_grad
    )
    assert shown["model_params"] == torch_params
