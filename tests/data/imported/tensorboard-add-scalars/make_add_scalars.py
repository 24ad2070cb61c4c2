"""A plain PyTorch loop that logs its training and validation losses together with ``SummaryWriter.add_scalars``
(the fixture beside this file): ``add_scalars("loss", {"train": ..., "val": ...}, step)`` writes each key into a
sub-folder of its own (``loss_train/``, ``loss_val/``), which TensorBoard shows as runs of their own; one training.

    OMP_NUM_THREADS=1 python tests/data/imported/tensorboard-add-scalars/make_add_scalars.py OUT

A logistic regression on 2,000 random points (seed 0), batch 50, SGD lr 0.1: 40 steps an epoch, 3 epochs; every 10
steps the mean training loss of those steps and the loss on 500 held-out points, with ``add_scalars``, and the
learning rate with ``add_scalar("train/lr", ...)``. ``OUT/logged.json``: each value as the script handed it to the
writer, with its step (what the test compares with, beside TensorBoard's own reader).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter

out = Path(sys.argv[1])
torch.manual_seed(0)
x = torch.randn(2500, 16)
y = (x @ torch.randn(16) > 0).long()
train_x, train_y, val_x, val_y = x[:2000], y[:2000], x[2000:], y[2000:]
model = torch.nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
writer = SummaryWriter(str(out / "run"))
logged: list[dict[str, float]] = []
step, since = 0, []
for _epoch in range(3):
    for i in range(0, 2000, 50):
        loss = torch.nn.functional.cross_entropy(model(train_x[i : i + 50]), train_y[i : i + 50])
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        step += 1
        since.append(float(loss))
        if step % 10 == 0:
            with torch.no_grad():
                val = float(torch.nn.functional.cross_entropy(model(val_x), val_y))
            train = sum(since) / len(since)
            writer.add_scalars("loss", {"train": train, "val": val}, step)
            writer.add_scalar("train/lr", 0.1, step)
            logged.append({"step": step, "train": train, "val": val})
            since = []
writer.close()
(out / "logged.json").write_text(json.dumps(logged, indent=1) + "\n")
