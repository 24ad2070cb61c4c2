"""A tiny CPU training that logs to a tracker as its users log: the generator of the trackers' cells of the
conformance matrix (tests/conformance/cells.toml; ``scripts/conformance`` runs it, under torchrun for the cells of
more than one process).

    loop.py DIGITS.npz OUT [--tracker wandb|tensorboard|mlflow] [--store sqlite|files] [--who rank0|group|every] [--step-arg] [--every N]
        [--zero-based] [--epochs N] [--kill-at STEP] [--kill-rank R] [--finish-in-finally] [--id ID] [--resume]

A small MLP on scikit-learn's digits (DDP over gloo where launched with more than one process; DistributedSampler,
batch 16 per rank), ``train/loss`` every ``--every`` optimizer steps (5), ``val/accuracy`` and ``val/loss`` after
each epoch, the last of them right before the tracker is closed. Options, each a way the tools' users log:

* ``--tracker wandb`` (offline): ``--who rank0``, only global rank 0 calls ``wandb.init`` (W&B's method 1), its
  config naming the world size; ``--who group``, every rank its own run in one ``group``, named ``rank<N>`` (method
  2); ``--step-arg``, the training step given as ``wandb.log(..., step=global_step)`` (W&B's ``_step`` is then the
  training step), else as a ``trainer/global_step`` key (the axis W&B's integrations log);
* ``--tracker tensorboard``: a ``SummaryWriter(OUT/rank<R>)`` on every rank (``--who every``, the PyTorch
  tutorial's loop run by torchrun) or on rank 0 only (``--who rank0``, ``OUT/rank0`` too), each value at the global
  step: the steps taken (``trainer``-style), or with ``--zero-based`` the index of the step just taken (from 0, as
  ``for step, batch in enumerate(loader)`` loops log it);
* ``--tracker mlflow``: rank 0's run (``mlflow.start_run``, the config as parameters, ``log_metrics(...,
  step=)`` at the steps taken, or their index with ``--zero-based``) in a SQLite store (``--store sqlite``,
  ``mlflow.db``) or a file store (``--store files``, ``mlruns/``);
* ``--kill-at STEP``: the training fails after that optimizer step (an exception, as a lost node's collective
  raises: the process exits with code 1, the trackers closed by their exit hooks), after saving a checkpoint; on rank
  ``--kill-rank`` alone, where given (the others stopped by torchrun's SIGTERM); with ``--finish-in-finally``,
  ``wandb.finish()`` called as the failure unwinds (a ``finally`` block: W&B records exit code 0); ``--resume``: a second launch that loads the
  checkpoint and logs into the same W&B runs with ``wandb.init(id=..., resume="allow")`` (``--id``: the id both
  launches give, with ``-rank<N>`` for a group).

Each rank writes what it logged and counted, with its own clock, to ``OUT/logged-rank<R>[-launch<L>].json``: the
expected values of the cell, known by construction (tests/conformance/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH, LOG_EVERY, LR = 16, 5, 0.05

parser = argparse.ArgumentParser()
parser.add_argument("digits")
parser.add_argument("out", type=Path)
parser.add_argument("--tracker", choices=["wandb", "tensorboard", "mlflow"], default="wandb")
parser.add_argument("--store", choices=["sqlite", "files"], default="sqlite")
parser.add_argument("--who", choices=["rank0", "group", "every"], default="rank0")
parser.add_argument("--step-arg", action="store_true")
parser.add_argument("--every", type=int, default=LOG_EVERY)
parser.add_argument("--zero-based", action="store_true")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--kill-at", type=int)
parser.add_argument(
    "--kill-rank", type=int, help="the one rank that fails at --kill-at (default: every rank)"
)
parser.add_argument("--finish-in-finally", action="store_true", help="wandb.finish() in a finally block")
parser.add_argument("--id", help="the W&B run id (each launch of a resumed training gives the same)")
parser.add_argument("--resume", action="store_true")
args = parser.parse_args()

distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group("gloo")
rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
torch.manual_seed(0)
arrays = np.load(args.digits)
checkpoint = args.out / f"checkpoint-rank{rank}.pt"
config = {"lr": LR, "batch_size": BATCH, "epochs": args.epochs, "world_size": world, "model": "mlp-64-128-10"}
run_id = args.id or secrets.token_hex(4)
if distributed and args.who == "rank0":  # every rank the same id: rank 0's, broadcast
    ids = [run_id]
    dist.broadcast_object_list(ids, src=0)
    run_id = ids[0]
logging = args.who != "rank0" or rank == 0
run = writer = None
if args.tracker == "wandb":
    import wandb
if logging and args.tracker == "wandb":
    name = f"rank{rank}" if args.who == "group" else "train"
    run = wandb.init(
        project="honestscale-conformance",
        group="digits" if args.who == "group" else None,
        job_type="train",
        name=name,
        config=config,
        id=f"{run_id}-rank{rank}" if args.who == "group" else run_id,
        resume="allow",
    )
elif logging and args.tracker == "tensorboard":
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(args.out / f"rank{rank}"))
elif logging:
    import mlflow

    mlflow.set_tracking_uri("sqlite:///mlflow.db" if args.store == "sqlite" else "file:./mlruns")
    mlflow.set_experiment("honestscale-conformance")
    mlflow.start_run(run_name="digits")
    mlflow.log_params(config)
train = TensorDataset(torch.tensor(arrays["x_train"]), torch.tensor(arrays["y_train"]))
x_val, y_val = torch.tensor(arrays["x_validation"]), torch.tensor(arrays["y_validation"])
sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(
    train, num_replicas=world, rank=rank, shuffle=True, seed=0
)
loader = DataLoader(train, batch_size=BATCH, sampler=sampler, drop_last=True)
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
model = DistributedDataParallel(net) if distributed else net
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
step, samples, first_epoch = 0, 0, 0
logged: list[dict[str, float | int]] = []
if args.resume:
    state = torch.load(checkpoint)
    net.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    step, first_epoch = state["step"], state["epoch"]


def log(values: dict[str, float | int]) -> None:
    if not logging:
        return
    before = time.time()  # the trackers take their time stamps inside the call: never earlier
    at = step - 1 if args.zero_based else step
    if writer is not None:
        for key, value in values.items():
            if key != "epoch":
                writer.add_scalar(key, value, at)
    elif args.tracker == "mlflow":
        mlflow.log_metrics({k: float(v) for k, v in values.items() if k != "epoch"}, step=at)
    elif args.step_arg:
        wandb.log(values, step=step)
    else:
        wandb.log({**values, "trainer/global_step": step})
    logged.append({"time": before, "step": step, **values})


def note(killed: bool) -> None:
    launch = "-launch2" if args.resume else ("-launch1" if args.kill_at else "")
    written = {"rank": rank, "world_size": world, "logging": logging, "steps": step, "samples": samples,
               "killed": killed, "run_id": run.id if run else None, "config": config, "logged": logged,
               "tracker": args.tracker, "torch": torch.__version__, "python": sys.version.split()[0]}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"logged-rank{rank}{launch}.json").write_text(json.dumps(written, indent=1) + "\n")


for epoch in range(first_epoch, args.epochs):
    sampler.set_epoch(epoch)
    model.train()
    for i, (x, y) in enumerate(loader):
        if args.resume and epoch == first_epoch and i < step - epoch * len(loader):
            continue  # the steps of this epoch the first launch took
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        step += 1
        samples += len(y)
        if step % args.every == 0:
            log({"train/loss": loss.item(), "epoch": epoch})
        if step == args.kill_at:
            args.out.mkdir(parents=True, exist_ok=True)
            torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                        "epoch": epoch}, checkpoint)  # fmt: skip
            note(killed=True)
            if args.kill_rank is None or rank == args.kill_rank:
                if run is not None and args.finish_in_finally:
                    wandb.finish()  # what ``try: train() finally: wandb.finish()`` does as the failure unwinds
                raise RuntimeError(f"a failure injected at step {step}")  # as a lost node's collective raises
    model.eval()
    with torch.no_grad():
        logits = net(x_val)
        accuracy = (logits.argmax(1) == y_val).float().mean().item()
        val_loss = torch.nn.functional.cross_entropy(logits, y_val).item()
    log({"val/accuracy": accuracy, "val/loss": val_loss, "epoch": epoch})
if run is not None:
    wandb.finish()
if writer is not None:
    writer.close()
if logging and args.tracker == "mlflow":
    mlflow.end_run()
note(killed=False)
if distributed:
    dist.destroy_process_group()
