"""A plain PyTorch DDP loop that logs to Weights & Biases offline, one run per rank in a group: the fixture beside
this file.

    python examples/record/digits_npz.py /tmp/wb/digits.npz
    cd /tmp/wb && WANDB_MODE=offline OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 \
        tests/data/imported/wandb-ddp/make_wandb_ddp.py /tmp/wb/digits.npz OUT

W&B's own pattern for distributed training with a run per process ("Log distributed training experiments",
method 2): each rank calls ``wandb.init(group=..., job_type="train", name="rank<R>", config=...)``, trains a small MLP
on scikit-learn's digits with DDP over gloo (DistributedSampler, batch 16 per rank, 2 epochs), logs ``train/loss``
with ``trainer/global_step`` every 5 steps (the step axis W&B's own integrations use: ``_step`` is W&B's count of
``log`` calls, not the training step) and ``val/accuracy``, ``val/loss`` after each epoch, and ``wandb.finish()``.
W&B writes ``wandb/offline-run-<time>-<id>/run-<id>.wandb`` under the working folder; each rank writes what it
logged, with its own clock, to ``OUT/logged-rank<R>.json``. The run folders are copied to ``OUT/wandb`` once every
process has exited (``cp -a wandb OUT/``: a copy taken inside the script can miss what W&B's service still writes
after ``wandb.finish()`` returns).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import wandb
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH, EPOCHS, LOG_EVERY, LR = 16, 2, 5, 0.05

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
arrays = np.load(sys.argv[1])
out = Path(sys.argv[2])
config = {"lr": LR, "batch_size": BATCH, "epochs": EPOCHS, "world_size": world, "model": "mlp-64-128-10"}
run = wandb.init(
    project="honestscale-fixture", group="digits-ddp", job_type="train", name=f"rank{rank}", config=config
)
train = TensorDataset(torch.tensor(arrays["x_train"]), torch.tensor(arrays["y_train"]))
x_val, y_val = torch.tensor(arrays["x_validation"]), torch.tensor(arrays["y_validation"])
sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(
    train, num_replicas=world, rank=rank, shuffle=True, seed=0
)
loader = DataLoader(train, batch_size=BATCH, sampler=sampler, drop_last=True)
model = DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
)
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
step, samples, logged = 0, 0, []
for epoch in range(EPOCHS):
    sampler.set_epoch(epoch)
    model.train()  # type: ignore[no-untyped-call]
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        step += 1
        samples += len(y)
        if step % LOG_EVERY == 0:
            values = {"train/loss": loss.item(), "trainer/global_step": step, "epoch": epoch}
            wandb.log(values)
            logged.append({"time": time.time(), **values})
    model.eval()
    with torch.no_grad():
        logits = model(x_val)
        values = {
            "val/accuracy": (logits.argmax(1) == y_val).float().mean().item(),
            "val/loss": torch.nn.functional.cross_entropy(logits, y_val).item(),
            "trainer/global_step": step,
            "epoch": epoch,
        }
    wandb.log(values)
    logged.append({"time": time.time(), **values})
folder = Path(run.dir).parent  # wandb/offline-run-<time>-<id>/files -> the run's folder
wandb.finish()
out.mkdir(parents=True, exist_ok=True)
written = {"rank": rank, "world_size": world, "steps": step, "samples": samples, "config": config, "logged": logged,
           "wandb": wandb.__version__, "torch": torch.__version__, "python": sys.version.split()[0],
           "date": time.strftime("%Y-%m-%d"), "run_folder": folder.name}  # fmt: skip
(out / f"logged-rank{rank}.json").write_text(json.dumps(written, indent=1) + "\n")
dist.destroy_process_group()
