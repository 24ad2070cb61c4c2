"""``honestscale.record.start``: a run of the user's own training, its run_start read from where it runs.

Rank, world size, hosts, the Slurm job and the launcher come from the environment (``_world.discover``, as for
the runners), corrected by the framework's own distributed state when it has one (``torch.distributed``); the
hardware, isolation, git commit and threading from ``_environment``, shared with the runners; the software from the
modules the process has imported. Nothing here imports a framework: it reads those already imported.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import re
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from honestscale.events import BACKENDS, event_path
from honestscale.record._clocks import Clock
from honestscale.record._recorder import Recorder
from honestscale.record._step import RecordError
from honestscale.record.environment import base_software, environment, threads
from honestscale.record.world import World, discover

DEFAULT_OUT = "honestscale-events"
# what start() records of the software, where the process imported it (import name -> the name recorded)
SOFTWARE = {
    "torch": "torch",
    "lightning": "lightning",
    "pytorch_lightning": "pytorch-lightning",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed",
    "tensorflow": "tensorflow",
    "keras": "keras",
    "tf_keras": "tf-keras",
    "horovod": "horovod",
    "mxnet": "mxnet",
    "jax": "jax",
    "numpy": "numpy",
}
FRAMEWORKS = ("torch", "tensorflow", "mxnet", "jax")  # the first imported one trains, unless framework= says
_live: list[Recorder] = []
_runs_started = [0]  # runs this process started: the n-th run of a Slurm step gets its own id


def _torch_dist() -> Any:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def framework_world(world: World) -> World:
    """The launcher's world, with rank and size from ``torch.distributed`` when its process group is up (the
    framework's own state decides: a script may start more or fewer processes than the launcher's variables say)."""
    dist = _torch_dist()
    if dist is None:
        return world
    rank, size = int(dist.get_rank()), int(dist.get_world_size())
    if (rank, size) == (world.rank, world.world_size):
        return world
    return dataclasses.replace(world, rank=rank, world_size=size)


def torch_agree(value: str) -> str | None:
    """Rank 0's ``value`` on every rank, through ``torch.distributed`` (None when no process group is up)."""
    dist = _torch_dist()
    if dist is None:
        return None
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return str(box[0])


def _backend() -> str | None:
    dist = _torch_dist()
    if dist is None:
        return None
    name = str(dist.get_backend()).lower()  # "gloo", "nccl" or "cpu:gloo,cuda:nccl"
    return next((b for b in ("nccl", "mpi", "gloo") if b in name), None) if name not in BACKENDS else name


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:80] or "run"


def agreed_run_id(name: str, world: World, agree: Callable[[str], str | None] | None) -> str:
    """One run id on every rank: ``HONESTSCALE_RUN_ID``; rank 0's new id through the framework (``agree``, else
    torch.distributed); the Slurm job and step; torchrun's rendezvous id and restart; alone, a new one."""
    n = _runs_started[0]
    suffix = f"-{n}" if n else ""
    if os.environ.get("HONESTSCALE_RUN_ID"):
        return os.environ["HONESTSCALE_RUN_ID"] + suffix
    fresh = f"{_slug(name)}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    if world.world_size == 1:
        return fresh
    agreed = (agree or torch_agree)(fresh)
    if agreed:
        return agreed
    if world.slurm_job_id:
        requeued = os.environ.get("SLURM_RESTART_COUNT", "0")
        restart = f"-r{requeued}" if requeued not in ("", "0") else ""
        return f"{_slug(name)}-slurm{world.slurm_job_id}.{world.slurm_step_id or 0}{restart}{suffix}"
    elastic = os.environ.get("TORCHELASTIC_RUN_ID")
    if elastic and elastic != "none":
        return f"{_slug(name)}-{elastic}-r{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}{suffix}"
    raise RecordError(
        f"run_id: the {world.world_size} ranks ({world.launcher}) have nothing to agree on one with: "
        "call start() after torch.distributed.init_process_group, or pass run_id= (the same on every "
        "rank), or set HONESTSCALE_RUN_ID"
    )


def software() -> dict[str, str]:
    """Python, the OS, and the version of every framework and library of the field the process imported."""
    out = base_software()
    for module, label in SOFTWARE.items():
        version = getattr(sys.modules.get(module), "__version__", None)
        if version is not None:
            out[label] = str(version)
    return out


def _framework() -> str:
    found = next((m for m in list(sys.modules) if m in FRAMEWORKS), None)  # sys.modules keeps import order
    if found is None:
        raise RecordError(
            "framework: no torch, tensorflow, mxnet or jax is imported, so which one trains cannot be "
            "read: pass framework= (e.g. framework='torch')"
        )
    return found


def _threads(framework: str) -> tuple[int | None, int | None]:
    if framework == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        return int(torch.get_num_threads()), int(torch.get_num_interop_threads())
    if framework == "tensorflow" and "tensorflow" in sys.modules:
        cfg = sys.modules["tensorflow"].config.threading
        return int(cfg.get_intra_op_parallelism_threads()), int(cfg.get_inter_op_parallelism_threads())
    return None, None


def _cuda(device: int | None, framework: str) -> dict[str, object]:
    """The accelerator when torch drives a CUDA device in this process; none when torch computes on the host
    on a machine without CUDA; unknown otherwise (start() before the model is on the GPU: the caller may say)."""
    torch = sys.modules.get("torch")
    if framework == "torch" and torch is not None and device is None and not torch.cuda.is_available():
        return {"accelerators_per_node": 0}
    if torch is None or device is None or not torch.cuda.is_available():
        return {}
    return {
        "accelerator": str(torch.cuda.get_device_name(device)),
        "accelerators_per_node": int(torch.cuda.device_count()),
    }


def _cuda_device() -> int | None:
    """The CUDA device this process computes on, when torch has initialised CUDA (None: host only)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.current_device())


def launch_command(world: World) -> list[str]:
    """The command that starts the run again: this process's own, behind its launcher with the run's world
    (``torchrun --nnodes=1 --nproc-per-node=2 train.py ...``), so a reader re-runs all the ranks, not one."""
    own = [sys.executable, *sys.argv]
    if world.world_size == 1:
        return own
    if world.launcher == "torchrun":
        return [
            "torchrun",
            f"--nnodes={world.nodes}",
            f"--nproc-per-node={world.local_world_size}",
            *sys.argv,
        ]
    if world.launcher == "slurm":
        return ["srun", f"--nodes={world.nodes}", f"--ntasks={world.world_size}", *own]
    if world.launcher in ("mpirun", "horovodrun"):
        return [world.launcher, "-np", str(world.world_size), *own]
    return own  # a framework that starts its own processes (Lightning's ddp): the script is the command


def config_hash(config: dict[str, object]) -> str:
    """A short hash over everything that defines the experiment (not the seed, not the rank)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _safety_net(rec: Recorder) -> None:
    """An uncaught exception or an exit without stop() still ends the run's file with a run_stop."""
    _live.append(rec)
    if len(_live) > 1:
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        try:
            for live in list(_live):
                live.__exit__(kind, exc, tb)
        finally:
            previous(kind, exc, tb)

    sys.excepthook = hook
    atexit.register(_at_exit)


def _at_exit() -> None:
    for live in list(_live):
        if not live.writer.stopped:
            live.stop(
                "failed", "the process ended without recorder.stop(): how the run ended was not recorded"
            )
        live.writer.close()


def _check_arguments(**given: Any) -> None:
    """The keywords start() computes with, checked before anything is written (the contract checks the rest)."""
    batch, target, warmup = given["global_batch"], given["target"], given["warmup_steps"]
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise RecordError(
            f"start(global_batch={batch!r}): the global batch is an integer >= 1 (samples per step, "
            "all ranks together), or None when unknown"
        )
    if target is not None and (isinstance(target, bool) or not isinstance(target, int | float)):
        raise RecordError(f"start(target={target!r}): the target quality is a number (e.g. 0.759), or None")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise RecordError(f"start(warmup_steps={warmup!r}): the first steps marked warm-up, an integer >= 0")


RESERVED = {
    "world_size": "read from the launcher and torch.distributed; pass world= to say otherwise",
    "config_hash": "computed from the run's definition",
    "global_batch_size": "pass global_batch=",
    "schema": "the contract's",
    "run_id": "pass run_id=",
    "rank": "read from the launcher; pass world=",
    "seq": "the writer's",
    "time": "the writer's",
    "kind": "the writer's",
}


def _check_fields(fields: dict[str, object]) -> None:
    for key in fields:
        if key in RESERVED:
            raise RecordError(f"start({key}=...): {key} is not given as a field: {RESERVED[key]}")


def start(
    *,
    campaign: str | None = None,
    model: str | None = None,
    dataset: str | None = None,
    global_batch: int | None = None,
    target: float | None = None,
    target_metric: str = "accuracy",
    name: str | None = None,
    purpose: str = "final",
    scaling: str | None = None,
    hyperparameters: dict[str, object] | None = None,
    framework: str | None = None,
    out: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    warmup_steps: int = 3,
    sample_interval: float = 1.0,
    device: int | None = None,
    clock: Clock | None = None,
    world: World | None = None,
    agree: Callable[[str], str | None] | None = None,
    handle_signals: bool | str = "if-default",
    **fields: Any,
) -> Recorder:
    """Start recording this rank's run: write its run_start and return the :class:`Recorder` its loop calls.

    Call it on every rank, after ``torch.distributed.init_process_group`` (the ranks agree on the run id through
    it) and once the model is on its GPU. ``campaign``, ``model``, ``dataset``, ``name``, ``purpose`` and ``scaling``
    file the run; ``global_batch`` is the samples of a step over all ranks; ``target`` (with ``target_metric``) the
    quality that ends training; ``hyperparameters`` a dict in the configuration hash; ``out`` the folder
    (``HONESTSCALE_OUT``, else ``./honestscale-events``); ``run_id`` the same on every rank (agreed when left out);
    ``warmup_steps`` the first steps marked warm-up; ``sample_interval`` seconds between system samples (0: off);
    ``device``/``clock``/``world``/``agree`` override what is read from the process; ``handle_signals`` whether a
    SIGTERM ends the run as ``timeout`` ("if-default": only where no handler is set). Any other keyword is a
    run_start field of the contract (``data_source``, ``train_size``, ``precision``, ...: docs/events.md).

    Raises :class:`RecordError` naming the argument and the fix. docs/record.md has the whole API.
    """
    _check_arguments(global_batch=global_batch, target=target, warmup_steps=warmup_steps)
    _check_fields(fields)
    world = world or framework_world(discover())
    framework = framework or _framework()
    out = Path(out or os.environ.get("HONESTSCALE_OUT") or DEFAULT_OUT)
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] and Path(sys.argv[0]).exists() else Path.cwd()
    label = name or f"{model or _slug(script.stem) or 'run'}-{world.world_size}w"
    run_id = run_id or agreed_run_id(label, world, agree)
    if event_path(out, run_id, world.rank).exists():
        raise RecordError(
            f"{event_path(out, run_id, world.rank)} exists: run id {run_id!r} was recorded already, and "
            "a run id names one run: pass another run_id (or leave it out for a new one)"
        )
    device = _cuda_device() if device is None else device
    hyper = dict(hyperparameters or {})
    if global_batch is not None and "local_batch_size" not in fields and global_batch % world.world_size == 0:
        fields["local_batch_size"] = global_batch // world.world_size
    version = fields.pop("framework_version", None) or getattr(
        sys.modules.get(framework), "__version__", None
    )
    definition = {
        "model": model,
        "dataset": dataset,
        "global_batch_size": global_batch,
        "hyperparameters": hyper,
        "world_size": world.world_size,
        "framework": framework,
        "framework_version": version,
    } | {k: v for k, v in fields.items() if k not in ("seed", "data_path")}
    start_fields: dict[str, object] = {
        **environment(world, script, data_path=fields.get("data_path"), device=device),
        **threads(*_threads(framework)),
        **_cuda(device, framework),
        "campaign": campaign,
        "name": label,
        "purpose": purpose,
        "scaling": scaling,
        "framework": framework,
        "framework_version": None if version is None else str(version),
        "backend": _backend() or ("none" if world.world_size == 1 else None),
        "world_size": world.world_size,
        "software": software(),
        "model": model,
        "dataset": dataset,
        "global_batch_size": global_batch,
        "scope": "end_to_end",
        "hyperparameters": hyper or None,
        "config_hash": config_hash(definition),
        "command": launch_command(world),
    }
    if target is not None:
        start_fields.update(
            stop_criterion="target_accuracy", stop_value=float(target), target_metric=target_metric
        )
    start_fields.update(fields)
    rec = Recorder(
        out,
        run_id,
        world,
        sample_interval=sample_interval,
        device=device,
        clock=clock,
        warmup_steps=warmup_steps,
        handle_signals=handle_signals,
        signals=("SIGTERM",),
    )
    try:
        rec.run_start(**start_fields)
    except ValueError as exc:  # a field the contract refuses: nothing is recorded, the file goes
        rec.writer.close()
        Path(rec.path).unlink(missing_ok=True)
        raise RecordError(f"start(): {exc}; see docs/events.md for the run_start fields") from None
    _runs_started[0] += 1
    rec.__enter__()
    _safety_net(rec)
    return rec
