"""A plain PyTorch DDP loop that logs to TensorBoard with a SummaryWriter per rank: the fixture beside this file.

    python examples/record/digits_npz.py /tmp/tb/digits.npz
    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 \
        tests/data/imported/tensorboard-ddp/make_tensorboard_ddp.py /tmp/tb/digits.npz [OUT]

What such loops do (the PyTorch tutorial "Visualizing models, data, and training with TensorBoard", run on every
rank): each rank opens ``SummaryWriter(OUT/rank<R>)``, trains a small MLP on scikit-learn's digits with DDP over gloo
(DistributedSampler, batch 16 per rank, 2 epochs), logs ``train/loss`` and ``train/lr`` every 5 steps with the
global step, ``val/accuracy`` and ``val/loss`` of the whole validation split after each epoch, and at the end
``add_hparams`` (PyTorch's: a sub-folder named by the time, with the hyper-parameters and the final metrics). Each
rank writes what it counted beside its log: ``rank<R>/counted.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from torch.utils.tensorboard import SummaryWriter

BATCH, EPOCHS, LOG_EVERY, LR = 16, 2, 5, 0.05

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
arrays = np.load(sys.argv[1])
out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent
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
writer = SummaryWriter(out / f"rank{rank}")
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
            writer.add_scalar("train/loss", loss.item(), step)
            writer.add_scalar("train/lr", optimizer.param_groups[0]["lr"], step)
            logged.append(step)
    model.eval()
    with torch.no_grad():
        logits = model(x_val)
        accuracy = (logits.argmax(1) == y_val).float().mean().item()
        val_loss = torch.nn.functional.cross_entropy(logits, y_val).item()
    writer.add_scalar("val/accuracy", accuracy, step)
    writer.add_scalar("val/loss", val_loss, step)
writer.add_hparams({"lr": LR, "batch_size": BATCH, "epochs": EPOCHS, "world_size": world},
                   {"hparam/accuracy": accuracy})  # fmt: skip
writer.close()
counted = {"rank": rank, "world_size": world, "steps": step, "samples": samples, "logged_steps": logged,
           "final_val_accuracy": accuracy, "torch": torch.__version__, "python": sys.version.split()[0],
           "date": time.strftime("%Y-%m-%d"), "launcher": "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "?"}  # fmt: skip
(out / f"rank{rank}" / "counted.json").write_text(json.dumps(counted, indent=1) + "\n")
dist.destroy_process_group()
