"""run_start from typed records (runners/_run_start.py): each runner fills small records (framework, model, data,
stop, threads, accelerators) and one function turns them, with the parsed arguments and the world, into the fields.
The expected fields below are what the flat 26-keyword builder wrote for the same inputs before the records (its
output captured, key order included: the event's JSON is written in that order), config hash included."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from honestscale.record.environment import threads as threading_fields
from honestscale.record.world import World
from honestscale.runners._run_start import (
    Accelerators,
    Data,
    Framework,
    Model,
    Sizes,
    Stop,
    Threads,
    run_start_fields,
)
from tests.conftest import REPO

ONE = World(
    rank=0,
    local_rank=0,
    world_size=1,
    local_world_size=1,
    master_addr="127.0.0.1",
    master_port=0,
    launcher="local",
    nodes=1,
)
TWO = World(
    rank=0,
    local_rank=0,
    world_size=2,
    local_world_size=2,
    master_addr="127.0.0.1",
    master_port=0,
    launcher="local",
    nodes=1,
)
ARGV = ["prog", "--model", "mlp"]
TORCH_OPTIONS = {
    "optimizer": "adamw",
    "lr_schedule": "cosine",
    "precision": "amp-bf16",
    "grad_compression": "fp16",
}
TORCH_HASH = "308a91ac582d3dc2"  # what the flat builder hashed for TORCH_OPTIONS, two ranks, torch 2.5.1


def _args(**changed: Any) -> argparse.Namespace:
    """A runner's parsed arguments: the options every runner shares, and how the run is recorded."""
    shared = {
        "model": "mlp",
        "dataset": "digits",
        "data_path": None,
        "synthetic_size": 10000,
        "batch_size": 64,
        "lr": 0.1,
        "momentum": 0.9,
        "seed": 0,
        "warmup_steps": 3,
        "epochs": 3,
        "target_accuracy": None,
        "out": "runs",
        "run_id": "r1",
        "campaign": "camp",
        "name": None,
        "purpose": "final",
        "tuning_study": None,
        "tuning_trial": None,
        "scaling": "strong",
        "sample_interval": 1.0,
    }
    return argparse.Namespace(**(shared | changed))


def _torch_shaped() -> dict[str, Any]:
    """torch_ddp's call on two GPUs: every record filled, the torch-only options given."""
    return run_start_fields(
        _args(**TORCH_OPTIONS),
        TWO,
        runner="honestscale.runners.torch_ddp",
        default_name="mlp-digits-2w",
        environment={"host": "h", "cpu": "c"},
        framework=Framework("torch", "2.5.1", "nccl", {"python": "3.12", "torch": "2.5.1"}),
        model=Model("mlp", 1234, (1, 8, 8), **TORCH_OPTIONS),
        data=Data("digits", Sizes(1257, 270, 270), "in_memory", None, local_batch_size=32),
        stop=Stop("epochs", 3),
        threads=Threads(2, 1),
        accelerators=Accelerators(2, "NVIDIA H100"),
    )


def _tf_shaped() -> dict[str, Any]:
    """tf_keras's (and mxnet_gluon's) call on one CPU: the defaults of the options it lacks, no accelerators."""
    return run_start_fields(
        _args(name="mine", seed=7, data_path="/data/d", dataset="memmap", target_accuracy=0.9),
        ONE,
        runner="honestscale.runners.tf_keras",
        default_name="mlp-memmap-1w",
        environment={"host": "h"},
        framework=Framework("tensorflow", "2.16.1", "grpc", {"tensorflow": "2.16.1"}),
        model=Model("mlp", 99, (3, 4)),
        data=Data("d", Sizes(10, 2, 3), "filesystem", "/data/d", local_batch_size=64),
        stop=Stop("target_accuracy", 0.9),
        threads=Threads(0, None),
    )


def _same(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert list(got.items()) == list(expected.items())  # the same keys, values and order
    assert json.dumps(got) == json.dumps(expected)


def test_a_torch_shaped_run_start_is_what_the_flat_builder_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ARGV)
    hyper = {
        "model": "mlp",
        "dataset": "digits",
        "data_path": None,
        "synthetic_size": 10000,
        "batch_size": 64,
        "lr": 0.1,
        "momentum": 0.9,
        "seed": 0,
        "warmup_steps": 3,
        "epochs": 3,
        "target_accuracy": None,
        "scaling": "strong",
        **TORCH_OPTIONS,
    }
    expected = {
        "host": "h",
        "cpu": "c",
        **threading_fields(2, 1),
        "campaign": "camp",
        "name": "mlp-digits-2w",
        "purpose": "final",
        "tuning_study": None,
        "tuning_trial": None,
        "framework": "torch",
        "framework_version": "2.5.1",
        "backend": "nccl",
        "world_size": 2,
        "accelerators_per_node": 2,
        "accelerator": "NVIDIA H100",
        "software": {"python": "3.12", "torch": "2.5.1"},
        "model": "mlp",
        "model_params": 1234,
        "dataset": "digits",
        "train_size": 1257,
        "validation_size": 270,
        "test_size": 270,
        "data_source": "in_memory",
        "data_path": None,
        "input_shape": [1, 8, 8],
        "global_batch_size": 64,
        "local_batch_size": 32,
        "optimizer": "adamw",
        "learning_rate": 0.1,
        "lr_schedule": "cosine",
        "precision": "amp-bf16",
        "grad_compression": "fp16",
        "seed": 0,
        "stop_criterion": "epochs",
        "stop_value": 3.0,
        "target_metric": "accuracy",
        "scope": "end_to_end",
        "scaling": "strong",
        "config_hash": TORCH_HASH,
        "hyperparameters": hyper,
        "command": [sys.executable, "-m", "honestscale.runners.torch_ddp", "--model", "mlp"],
    }
    _same(_torch_shaped(), expected)


def test_a_tf_shaped_run_start_is_what_the_flat_builder_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ARGV)
    hyper = {
        "model": "mlp",
        "dataset": "memmap",
        "data_path": "/data/d",
        "synthetic_size": 10000,
        "batch_size": 64,
        "lr": 0.1,
        "momentum": 0.9,
        "seed": 7,
        "warmup_steps": 3,
        "epochs": 3,
        "target_accuracy": 0.9,
        "scaling": "strong",
    }
    expected = {
        "host": "h",
        **threading_fields(0, None),
        "campaign": "camp",
        "name": "mine",
        "purpose": "final",
        "tuning_study": None,
        "tuning_trial": None,
        "framework": "tensorflow",
        "framework_version": "2.16.1",
        "backend": "none",
        "world_size": 1,
        "accelerators_per_node": 0,
        "accelerator": None,
        "software": {"tensorflow": "2.16.1"},
        "model": "mlp",
        "model_params": 99,
        "dataset": "d",
        "train_size": 10,
        "validation_size": 2,
        "test_size": 3,
        "data_source": "filesystem",
        "data_path": "/data/d",
        "input_shape": [3, 4],
        "global_batch_size": 64,
        "local_batch_size": 64,
        "optimizer": "sgd",
        "learning_rate": 0.1,
        "lr_schedule": "constant",
        "precision": "fp32",
        "grad_compression": "none",
        "seed": 7,
        "stop_criterion": "target_accuracy",
        "stop_value": 0.9,
        "target_metric": "accuracy",
        "scope": "end_to_end",
        "scaling": "strong",
        "config_hash": "adecb684a623039c",
        "hyperparameters": hyper,
        "command": [sys.executable, "-m", "honestscale.runners.tf_keras", "--model", "mlp"],
    }
    _same(_tf_shaped(), expected)


def _hash(framework: str, version: str, *, seed: int = 0) -> str:
    """The config hash of TORCH_OPTIONS on two ranks, built the way a small mxnet-like runner calls: nothing of
    the model, data, stop, threads or accelerators in common with the torch-shaped call."""
    return str(
        run_start_fields(
            _args(**TORCH_OPTIONS, seed=seed),
            TWO,
            runner="r",
            default_name="x",
            environment={},
            framework=Framework(framework, version, "b", {}),
            model=Model("m", 1, (1,)),
            data=Data("d", Sizes(1, 1, 1), "in_memory", None, local_batch_size=1),
            stop=Stop("epochs", 1),
            threads=Threads(None, None),
        )["config_hash"]
    )


def test_one_config_hash_definition_whichever_runner_builds_it() -> None:
    """The hash covers the hyper-parameters but the seed, and the world size, the framework and its version:
    the same hyper-parameters on the same framework hash the same whatever else the runner records, and each
    framework family hashes as the flat builder did (the framework is part of the definition)."""
    assert _hash("torch", "2.5.1") == _hash("torch", "2.5.1", seed=9) == TORCH_HASH
    assert _torch_shaped()["config_hash"] == TORCH_HASH
    flat = {
        "horovod-torch": "17989e4079cb3cc2",
        "tensorflow": "bdf0f1ca1ddb03a2",
        "mxnet": "588c05a27c6da521",
    }
    versions = {"horovod-torch": "0.28.1", "tensorflow": "2.16.1", "mxnet": "1.9.1"}
    assert {f: _hash(f, v) for f, v in versions.items()} == flat


def test_the_builder_imports_no_framework() -> None:
    """Runners import it inside their own framework's environment: the standard library only at import time."""
    code = (
        "import sys, honestscale.runners._run_start; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'tensorflow', 'keras', 'mxnet', 'numpy', "
        "'horovod', 'duckdb'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
