"""PyTorch DistributedDataParallel runner: trains a model data-parallel and writes honestscale events.

Run one process per rank, under ``honestscale run --framework torch --workers N``, ``torchrun``,
``mpirun`` or ``srun``: rank and world come from the launcher's environment. ``gloo`` on CPU,
``nccl`` on GPU. With ``--distributed horovod`` (``honestscale run --framework horovod-torch``, under
``horovodrun``) the same model and loop are distributed by Horovod's ``DistributedOptimizer`` instead
of DDP; its exposed communication is the wait in ``optimizer.synchronize()``.

    python -m honestscale.runners.torch_ddp --model mlp --dataset digits --epochs 3 --out runs/

Each step is split into data, compute, communication (the part of backward spent waiting
for the gradient all-reduce, measured through a DDP communication hook) and optimizer time;
evaluations on train and validation run at chosen epochs, on test only once, at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from honestscale.record import world as _world
from honestscale.runners import _transformer, usermodel
from honestscale.runners._ddp_comm import DDPCommTiming
from honestscale.runners._loop import Budget, Done, Loop, check_target
from honestscale.runners._run_start import (
    NO_ACCELERATORS,
    Accelerators,
    Data,
    Framework,
    Model,
    Sizes,
    Stop,
    Threads,
)
from honestscale.runners.instrument import (
    COUNT,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    CudaClock,
    HostClock,
    Recorder,
    StepTimer,
    add_recording_args,
    add_training_args,
    base_software,
    environment,
    run_entry,
    run_start_fields,
    unknown_names,
)

# what --model and --dataset offer besides FILE.py:FUNCTION (settle_args refuses anything else before a rank starts)
NAMES = {
    "model": ("mlp", "cnn", "resnet18", "resnet50", "gpt"),
    "dataset": ("digits", "synthetic", "folder", "memmap", "cpython-stdlib"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m honestscale.runners.torch_ddp",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("what to train")
    g.add_argument("--model", default="mlp",
                   help="mlp, cnn, resnet18, resnet50, gpt (a transformer on the CPython sources, with --parallel "
                        "layouts: see below), or your own: FILE.py:FUNCTION returning a plain nn.Module "
                        "(called with input_shape and num_classes if it takes them) (default: mlp)")  # fmt: skip
    g.add_argument("--dataset", default=None,
                   help="digits (scikit-learn, offline), synthetic, folder (image folder: train/ val/ [test/]), "
                        "memmap ({train,validation,test}_{x,y}.npy), or FILE.py:FUNCTION returning "
                        '{"train": (x, y), "validation": ..., "test": ...} NumPy arrays (default: digits)')  # fmt: skip
    g.add_argument("--data-path", type=Path, help="folder of a folder or memmap dataset")
    g.add_argument(
        "--image-size", type=POSITIVE_INT, default=224, help="side of the images of a folder dataset"
    )
    g.add_argument("--synthetic-shape", default="3,32,32", help="input shape of synthetic samples")
    g.add_argument(
        "--synthetic-size", type=POSITIVE_INT, default=10000, help="train samples of the synthetic dataset"
    )
    g.add_argument("--synthetic-classes", type=POSITIVE_INT, default=10)
    g, stop = add_training_args(p)
    g.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    g.add_argument("--weight-decay", type=NON_NEGATIVE, default=0.0)
    g.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    g.add_argument("--precision", choices=["fp32", "amp-bf16", "amp-fp16"], default="fp32")
    g.add_argument("--grad-compression", choices=["none", "fp16", "powersgd"], default="none",
                   help="DDP communication hook compressing gradients on the wire")  # fmt: skip
    g.add_argument("--distributed", choices=["ddp", "horovod"], default="ddp",
                   help="DDP (torch.distributed) or Horovod's DistributedOptimizer (default: ddp)")  # fmt: skip
    g.add_argument("--loader-workers", type=COUNT, default=0, help="DataLoader worker processes per rank")
    g.add_argument("--cpu", action="store_true", help="train on the CPU even when a GPU is there")
    stop.add_argument("--max-time", type=POSITIVE, help="stop after this many seconds of training")
    _transformer.add_args(p)
    add_recording_args(p)
    return p


def _run_id(args: argparse.Namespace, world: _world.World) -> str:
    if args.run_id:
        return str(args.run_id)
    args.name = args.name or usermodel.label(args.model)
    if world.slurm_job_id:
        return f"{args.name or args.model}-slurm{world.slurm_job_id}.{world.slurm_step_id or 0}"
    if os.environ.get("TORCHELASTIC_RUN_ID") and os.environ["TORCHELASTIC_RUN_ID"] != "none":
        return f"{args.name or args.model}-{os.environ['TORCHELASTIC_RUN_ID']}"
    if world.world_size == 1:
        return f"{args.name or args.model}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    raise SystemExit("error: --run-id is needed with more than one rank (every rank must use the same)")


def _splits(args: argparse.Namespace) -> Any:
    from honestscale.runners import _torch_data as data

    if usermodel.is_spec(args.dataset):
        return data.from_arrays(usermodel.dataset(args.dataset), usermodel.name(args.dataset))
    if args.dataset in (None, "digits"):
        return data.digits()
    if args.dataset == "synthetic":
        shape = tuple(int(d) for d in args.synthetic_shape.split(","))
        return data.synthetic(shape, args.synthetic_classes, args.synthetic_size)
    if args.dataset in ("folder", "memmap"):
        if args.data_path is None:
            raise data.DataError(f"--dataset {args.dataset} needs --data-path")
        if args.dataset == "memmap":
            return data.memmap(args.data_path)
        return data.image_folder(args.data_path, args.image_size)
    raise data.DataError(f"unknown dataset {args.dataset!r}: digits, synthetic, folder or memmap")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if (why := settle_args(args, parser, argv)) is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    try:
        world = _world.discover()
    except _world.WorldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.model != "gpt" and args.batch_size % world.world_size:
        print(f"error: --batch-size {args.batch_size} (global) is not divisible by the {world.world_size} ranks; "
              f"use a multiple of {world.world_size}", file=sys.stderr)  # fmt: skip
        return 2
    run_id = _run_id(args, world)
    with Recorder(args.out, run_id, world, sample_interval=args.sample_interval,
                     device=world.local_rank if _wants_cuda(args) else None) as rec:  # fmt: skip
        if args.model == "gpt":
            _transformer.train(args, world, rec, _wants_cuda(args))
        else:
            _train(args, world, run_id, rec)
    return 0


def settle_args(
    args: argparse.Namespace, parser: argparse.ArgumentParser, argv: list[str] | None = None
) -> str | None:
    """What the runner refuses once its options are parsed (the transformer's options on another model), or None;
    ``honestscale run`` and campaign specs ask it before any rank starts. ``--model gpt`` takes its own defaults
    for what its command line ``argv`` (default: this process's) does not give."""
    if (why := unknown_names(args, NAMES)) is not None:
        return why
    if args.model != "gpt":
        return _transformer.settle(args, parser)
    if (why := _gpt_refusal(args)) is None:
        _transformer.gpt_defaults(args, sys.argv[1:] if argv is None else argv)
    return why


def _gpt_refusal(args: argparse.Namespace) -> str | None:
    """Options of the image and MLP path that mean nothing to the transformer, named with what to use."""
    if args.dataset not in (None, "cpython-stdlib"):
        return f"--model gpt trains on the CPython standard library's sources; --dataset {args.dataset} is not offered"
    if args.target_accuracy is not None:
        return (
            "--model gpt stops on a validation loss: use --target-loss (nats per byte), not --target-accuracy"
        )
    if args.distributed != "ddp" or args.grad_compression != "none":
        return "--model gpt lays itself out with --parallel; --distributed and --grad-compression are for the other models"
    if args.optimizer != "sgd":
        return "--model gpt trains with AdamW; leave --optimizer out"
    return None


def _horovod_version() -> str:
    import horovod

    return str(horovod.__version__)


def _wants_cuda(args: argparse.Namespace) -> bool:
    if args.cpu:
        return False
    import torch

    return bool(torch.cuda.is_available())


def _horovod(args: argparse.Namespace, world: _world.World) -> Any:
    """Horovod's torch module, started and checked against the launcher's world; None without --distributed horovod."""
    if args.distributed != "horovod":
        return None
    import horovod.torch

    from honestscale.runners import _torch_data as data

    hvd = horovod.torch
    hvd.init()
    if hvd.size() != world.world_size or hvd.rank() != world.rank:
        raise _world.WorldError(f"Horovod sees rank {hvd.rank()} of {hvd.size()}, the launcher's environment "
                                f"rank {world.rank} of {world.world_size}: start the ranks with horovodrun, or with "
                                "srun --mpi=pmix and a Horovod built with MPI")  # fmt: skip
    if args.grad_compression == "powersgd":
        raise data.DataError("--grad-compression powersgd is a DDP hook: with Horovod use none or fp16")
    return hvd


def _stack(hvd: Any, cuda: bool, world_size: int) -> tuple[str, str, dict[str, str], str]:
    """The framework, its version, the software versions and the gradient exchange's backend, as run_start records
    them."""
    import torch

    framework, version = ("horovod-torch", _horovod_version()) if hvd else ("torch", torch.__version__)
    software = base_software() | {"torch": torch.__version__}
    backend = ("nccl" if cuda else "gloo") if world_size > 1 else "none"
    if hvd:
        software["horovod"] = version
        if world_size > 1 and not (cuda and hvd.nccl_built()):
            backend = "mpi" if hvd.mpi_enabled() else "gloo"
    if cuda:
        software |= {
            "cuda": str(torch.version.cuda),
            "cudnn": str(torch.backends.cudnn.version()),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        }
    return framework, version, software, backend


def _optimizer(args: argparse.Namespace, net: Any, model: Any, hvd: Any) -> Any:
    """SGD or Adam over the (DDP-wrapped) model; with Horovod, its state broadcast from rank 0 and the optimizer
    wrapped in Horovod's DistributedOptimizer."""
    import torch

    opt: torch.optim.Optimizer
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(
            net.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay
        )
    else:
        opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    if hvd:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        compression = hvd.Compression.fp16 if args.grad_compression == "fp16" else hvd.Compression.none
        opt = hvd.DistributedOptimizer(
            opt, named_parameters=model.named_parameters(), compression=compression
        )
    return opt


def _train(args: argparse.Namespace, world: _world.World, run_id: str, rec: Recorder) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler

    from honestscale.runners import _torch_data as data

    cuda = _wants_cuda(args)
    device = torch.device(f"cuda:{world.local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if args.precision == "amp-fp16" and not cuda:
        raise data.DataError("--precision amp-fp16 needs a GPU; use amp-bf16 on the CPU")
    hvd = _horovod(args, world)
    torch.manual_seed(args.seed)
    splits = _splits(args)
    model_name = args.model
    if usermodel.is_spec(args.model):  # the user's single-device model, distributed below like the built-ins
        built = usermodel.build(args.model, "torch", splits.input_shape, splits.num_classes)
        model, model_name = built.to(device), usermodel.name(args.model)
    else:
        model = data.build_model(args.model, splits.input_shape, splits.num_classes).to(device)
    local_batch = args.batch_size // world.world_size
    budget = Budget.of(args, args.target_accuracy)
    criterion, target = budget.criterion()
    framework, version, software, backend = _stack(hvd, cuda, world.world_size)
    if world.world_size > 1 and hvd is None:
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=f"tcp://{world.master_addr}:{world.master_port}",
            rank=world.rank,
            world_size=world.world_size,
            timeout=timedelta(minutes=10),
        )
    # torch.optim imports TorchDynamo (about 1.4 s) on first use: a one-off framework cost, not training time
    import torch._dynamo

    rec.run_start(**run_start_fields(
        args, world, runner="honestscale.runners.torch_ddp", default_name=f"{model_name}-{splits.name}-{world.world_size}w",
        environment=environment(world, Path(__file__), data_path=splits.path, device=world.local_rank if cuda else None),
        framework=Framework(framework, version, backend, software),
        model=Model(model_name, sum(p.numel() for p in model.parameters() if p.requires_grad), tuple(splits.input_shape),
                    optimizer=args.optimizer, lr_schedule=args.lr_schedule, precision=args.precision,
                    grad_compression=args.grad_compression),
        data=Data(splits.name, Sizes(**splits.sizes()), splits.source, splits.path, local_batch_size=local_batch),
        stop=Stop(criterion, target), threads=Threads(torch.get_num_threads(), torch.get_num_interop_threads()),
        accelerators=Accelerators(world.local_world_size, torch.cuda.get_device_name(device)) if cuda else NO_ACCELERATORS,
    ))  # fmt: skip

    clock = CudaClock() if cuda else HostClock()
    comm = DDPCommTiming(clock)
    net: torch.nn.Module = model
    if world.world_size > 1 and hvd is None:
        net = DDP(model, device_ids=[world.local_rank] if cuda else None)
        comm.register(net, args.grad_compression)
    elif args.grad_compression != "none" and (hvd is None or world.world_size == 1):
        print("note: --grad-compression has no effect with one rank", file=sys.stderr)

    sampler: DistributedSampler[Any] = DistributedSampler(splits.train, num_replicas=world.world_size, rank=world.rank, shuffle=True,
                                 seed=args.seed, drop_last=True)  # fmt: skip
    loader = DataLoader(splits.train, batch_size=local_batch, sampler=sampler, drop_last=True,
                        num_workers=args.loader_workers, pin_memory=cuda,
                        persistent_workers=args.loader_workers > 0)  # fmt: skip
    if len(loader) == 0:
        raise data.DataError(
            f"{len(splits.train)} train samples over {world.world_size} ranks give no full batch of {local_batch}"
        )
    opt = _optimizer(args, net, model, hvd)
    hvd_opt: Any = opt
    sched = (
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
        if args.lr_schedule == "cosine"
        else None
    )
    amp_dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler("cuda") if args.precision == "amp-fp16" else None
    loss_fn = torch.nn.CrossEntropyLoss()
    timer = StepTimer(clock)
    w = rec.writer

    def evaluate_split(split: str, ds: Any, epoch: int, limit: int | None = None) -> float:
        model.eval()
        correct = total = 0
        with torch.no_grad(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            for xb, yb in DataLoader(ds, batch_size=512):
                xb, yb = xb.to(device), yb.to(device)
                correct += int((model(xb).argmax(1) == yb).sum())
                total += len(yb)
                if limit is not None and total >= limit:
                    break
        model.train()
        acc = correct / max(total, 1)
        w.eval(split=split, metric="accuracy", value=acc, samples=total, epoch=epoch)
        return acc

    def evaluate(epoch: int, last: bool) -> float:
        evaluate_split("train", splits.train, epoch, limit=10000)
        return evaluate_split("validation", splits.validation, epoch)

    def decide(flag: bool) -> bool:
        """Rank 0's decision, shared by every rank."""
        if world.world_size == 1:
            return flag
        t = torch.tensor([1 if flag else 0], device=device)
        if hvd:
            return bool(hvd.broadcast(t, 0, name="honestscale.decide").item())
        dist.broadcast(t, 0)
        return bool(t.item())

    def batches(epoch: int) -> Any:
        """The epoch's batches; the sampler's epoch and the loader's iterator (its workers) are set up here,
        before the first step is timed, as they always were."""
        sampler.set_epoch(epoch)
        it = iter(loader)
        return ((xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)) for xb, yb in it)

    def train_step(batch: Any) -> Done:
        xb, yb = batch
        opt.zero_grad() if hvd else opt.zero_grad(set_to_none=True)  # Horovod takes no argument
        comm.begin_step()
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = loss_fn(net(xb), yb)
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if hvd:  # backward started each gradient's all-reduce; synchronize() waits for the rest
            comm.last_ready = clock.now()
            hvd_opt.synchronize()
        timer.mark("compute")
        with hvd_opt.skip_synchronize() if hvd else contextlib.nullcontext():
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
        if sched is not None:
            sched.step()
        timer.mark("optimizer")
        return Done(loss=loss.detach(), samples=len(yb), comm_from=comm.last_ready)

    def mean_loss(losses: list[Any]) -> float | None:
        return float(torch.stack(losses).float().mean()) if losses else None

    loop = Loop(
        w, timer, budget, decide=decide, replicas=world.world_size, is_main=world.is_main, mean_loss=mean_loss
    )
    net.train()
    outcome = loop.run(batches, train_step, evaluate, lambda acc: acc >= float(args.target_accuracy),
                       lambda epoch: evaluate_split("test", splits.test, epoch))  # fmt: skip
    if world.world_size > 1:
        hvd.barrier() if hvd else dist.barrier()  # the last collective: no rank tears the group down while another still uses it
    if hvd:
        # MPI_Finalize (Horovod built with MPI): under srun --mpi=pmix a rank that exits without it makes PMIx
        # abort the step, killing the ranks still writing their last events
        hvd.shutdown()
    check_target(outcome, budget)


def run() -> None:
    run_entry(main)


if __name__ == "__main__":
    run()
