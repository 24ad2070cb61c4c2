"""One run_start for every runner: the same fields, and one config hash over the same definition.

Each runner fills small typed records with what only it knows (its framework, model, data, stop, the threads its
framework runs, its accelerators); the options every runner shares (batch, learning rate, seed, campaign, purpose,
scaling) come from its parsed arguments here, so a configuration hashes the same way whichever framework ran it; the
CPUs a rank may run on and the launcher's threading knobs are read here, the same way for every framework.

Standard library only at import time: the Horovod, TensorFlow and MXNet environments import it as they are.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, NamedTuple

from honestscale.record import config_hash
from honestscale.record.environment import threads as threading_fields
from honestscale.record.world import World
from honestscale.runners._arguments import RECORDING_KEYS


@dataclass(frozen=True)
class Framework:
    """Which framework ran: ``name`` (torch, horovod-torch, tensorflow, horovod-tf, mxnet) and ``version``, the
    ``backend`` its ranks talk through (recorded as "none" for one rank) and the ``software`` versions beside it."""

    name: str
    version: str
    backend: str
    software: dict[str, str]


@dataclass(frozen=True)
class Model:
    """What trained and how: the model's name, its trainable parameters, one sample's shape, the optimizer, the
    learning-rate schedule, the precision and the gradient compression (the defaults: what a runner without the
    option does)."""

    name: str
    params: int
    input_shape: tuple[int, ...]
    optimizer: str = "sgd"
    lr_schedule: str = "constant"
    precision: str = "fp32"
    grad_compression: str = "none"


@dataclass(frozen=True)
class Sizes:
    """Samples in each split (named as run_start names them)."""

    train_size: int
    validation_size: int
    test_size: int


@dataclass(frozen=True)
class Data:
    """What it trained on: the dataset's name, its splits' sizes, where it was read from (``source``: in_memory,
    filesystem ...; ``path``: the folder, if any), and the samples each rank takes per step."""

    name: str
    sizes: Sizes
    source: str
    path: str | None
    local_batch_size: int


@dataclass(frozen=True)
class Stop:
    """When the run stops: the criterion (epochs, target_accuracy, max_samples ...) and its value."""

    criterion: str
    value: float


class Threads(NamedTuple):
    """The intra-op and inter-op threads the framework reports, asked inside each runner (None: it cannot tell;
    0: the framework chooses)."""

    intra_op: int | None
    inter_op: int | None


@dataclass(frozen=True)
class Accelerators:
    """The accelerators each node gives the run and their name (none: 0 and None)."""

    per_node: int = 0
    name: str | None = None


NO_ACCELERATORS = Accelerators()


def hyperparameters(args: Any) -> dict[str, object]:
    """Every option of the run except how it is recorded (out, run id, campaign, name ...)."""
    hyper = {k: v for k, v in vars(args).items() if k not in RECORDING_KEYS}
    hyper["data_path"] = str(args.data_path) if getattr(args, "data_path", None) else None
    return hyper


def _definition(hyper: dict[str, object], world: World, framework: Framework) -> dict[str, object]:
    """What the config hash covers: every hyper-parameter but the seed, and the world size, the framework and its
    version."""
    return {k: v for k, v in hyper.items() if k != "seed"} | {
        "world_size": world.world_size,
        "framework": framework.name,
        "framework_version": framework.version,
    }


def run_start_fields(
    args: Any,
    world: World,
    *,
    runner: str,
    default_name: str,
    environment: dict[str, object],
    framework: Framework,
    model: Model,
    data: Data,
    stop: Stop,
    threads: Threads,
    accelerators: Accelerators = NO_ACCELERATORS,
) -> dict[str, object]:
    """The run_start fields of a runner's run, for ``Recorder.run_start(**fields)``: ``runner`` the module run
    (``python -m runner``), ``default_name`` the run's name unless ``--name`` gives one, ``environment`` what
    :func:`honestscale.record.environment.environment` captured.

    The config hash covers every hyper-parameter but the seed, and the world size, the framework and its version:
    one definition for every framework family (torch, horovod-torch, tensorflow, horovod-tf, mxnet).
    """
    hyper = hyperparameters(args)
    return {
        **environment,
        **threading_fields(*threads),
        "campaign": args.campaign,
        "name": args.name or default_name,
        "purpose": args.purpose,
        "tuning_study": args.tuning_study,
        "tuning_trial": args.tuning_trial,
        "framework": framework.name,
        "framework_version": framework.version,
        "backend": framework.backend if world.world_size > 1 else "none",
        "world_size": world.world_size,
        "accelerators_per_node": accelerators.per_node,
        "accelerator": accelerators.name,
        "software": framework.software,
        "model": model.name,
        "model_params": model.params,
        "dataset": data.name,
        "train_size": data.sizes.train_size,
        "validation_size": data.sizes.validation_size,
        "test_size": data.sizes.test_size,
        "data_source": data.source,
        "data_path": data.path,
        "input_shape": list(model.input_shape),
        "global_batch_size": args.batch_size,
        "local_batch_size": data.local_batch_size,
        "optimizer": model.optimizer,
        "learning_rate": args.lr,
        "lr_schedule": model.lr_schedule,
        "precision": model.precision,
        "grad_compression": model.grad_compression,
        "seed": args.seed,
        "stop_criterion": stop.criterion,
        "stop_value": float(stop.value),
        "target_metric": "accuracy",
        "scope": "end_to_end",
        "scaling": args.scaling,
        "config_hash": config_hash(_definition(hyper, world, framework)),
        "hyperparameters": hyper,
        "command": [sys.executable, "-m", runner, *sys.argv[1:]],
    }
