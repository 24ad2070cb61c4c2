"""One run_start for every runner: the same fields, and one config hash over the same definition.

Each runner passes what only it knows (its framework, model, data, device, the threads its framework runs); the
options every runner shares (batch, learning rate, seed, stop criterion, campaign, purpose, scaling) come from its
parsed arguments here, so a configuration hashes the same way whichever framework ran it; the CPUs a rank may run
on and the launcher's threading knobs are read here, the same way for every framework.
"""

from __future__ import annotations

import sys
from typing import Any

from honestscale.record import config_hash
from honestscale.record.environment import threads as threading_fields
from honestscale.record.world import World
from honestscale.runners._arguments import RECORDING_KEYS


def hyperparameters(args: Any) -> dict[str, Any]:
    """Every option of the run except how it is recorded (out, run id, campaign, name ...)."""
    hyper = {k: v for k, v in vars(args).items() if k not in RECORDING_KEYS}
    hyper["data_path"] = str(args.data_path) if getattr(args, "data_path", None) else None
    return hyper


def run_start_fields(
    args: Any,
    world: World,
    *,
    runner: str,
    default_name: str,
    environment: dict[str, Any],
    framework: str,
    framework_version: str,
    backend: str,
    software: dict[str, str],
    model: str,
    model_params: int,
    dataset: str,
    sizes: dict[str, int],
    data_source: str,
    data_path: str | None,
    input_shape: list[int],
    local_batch_size: int,
    stop_criterion: str,
    stop_value: float,
    threads: tuple[int | None, int | None],
    accelerators_per_node: int = 0,
    accelerator: str | None = None,
    optimizer: str = "sgd",
    lr_schedule: str = "constant",
    precision: str = "fp32",
    grad_compression: str = "none",
) -> dict[str, Any]:
    """The run_start fields of a runner's run. ``sizes``: train_size, validation_size, test_size; ``threads``: the
    intra-op and inter-op threads the framework reports (None: it cannot tell), asked inside each runner.

    The config hash covers every hyper-parameter but the seed, the world size, the framework and its
    version: the same for every framework family (torch, horovod-torch, tensorflow, horovod-tf, mxnet).
    """
    hyper = hyperparameters(args)
    definition = {k: v for k, v in hyper.items() if k != "seed"} | {
        "world_size": world.world_size,
        "framework": framework,
        "framework_version": framework_version,
    }
    return {
        **environment,
        **threading_fields(*threads),
        "campaign": args.campaign,
        "name": args.name or default_name,
        "purpose": args.purpose,
        "tuning_study": args.tuning_study,
        "tuning_trial": args.tuning_trial,
        "framework": framework,
        "framework_version": framework_version,
        "backend": backend if world.world_size > 1 else "none",
        "world_size": world.world_size,
        "accelerators_per_node": accelerators_per_node,
        "accelerator": accelerator,
        "software": software,
        "model": model,
        "model_params": model_params,
        "dataset": dataset,
        **sizes,
        "data_source": data_source,
        "data_path": data_path,
        "input_shape": input_shape,
        "global_batch_size": args.batch_size,
        "local_batch_size": local_batch_size,
        "optimizer": optimizer,
        "learning_rate": args.lr,
        "lr_schedule": lr_schedule,
        "precision": precision,
        "grad_compression": grad_compression,
        "seed": args.seed,
        "stop_criterion": stop_criterion,
        "stop_value": float(stop_value),
        "target_metric": "accuracy",
        "scope": "end_to_end",
        "scaling": args.scaling,
        "config_hash": config_hash(definition),
        "hyperparameters": hyper,
        "command": [sys.executable, "-m", runner, *sys.argv[1:]],
    }
