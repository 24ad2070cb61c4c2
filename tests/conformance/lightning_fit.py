"""A tiny CPU training with Lightning's ``Trainer`` and the loggers its users give it: the generator of the Lightning
cells of the conformance matrix (tests/conformance/cells.toml; ``scripts/conformance`` runs it).

    lightning_fit.py DIGITS.npz OUT [--loggers tensorboard,mlflow] [--epochs N] [--log-every N] [--devices N]

A small MLP on scikit-learn's digits (batch 16, SGD with momentum), ``self.log("train_loss", ...)`` in
``training_step`` and ``self.log("val_acc", ...)`` in ``validation_step``, ``Trainer(log_every_n_steps=N)`` with
``TensorBoardLogger(OUT/tb)``, ``MLFlowLogger(tracking_uri="sqlite:///mlflow.db")`` or both at once (one training
logged by two tools: it must land as one run). ``--devices N``: DDP over N CPU processes (``strategy="ddp"``, run
under torchrun, whose environment Lightning takes; its loggers write on global rank 0 alone).

What the training did, counted by a callback of its own (its own clock): ``OUT/logged-rank0.json``, the expected
values of the cell (tests/conformance/README.md; ``logged-rank<R>.json`` per rank under DDP): the optimizer steps (``trainer.global_step``), each validation's
``val_acc`` after the sanity check, when it was logged.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

BATCH, LR = 16, 0.05

parser = argparse.ArgumentParser()
parser.add_argument("digits")
parser.add_argument("out", type=Path)
parser.add_argument("--loggers", default="tensorboard")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--log-every", type=int, default=5)
parser.add_argument("--devices", type=int, default=1)
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)
pl.seed_everything(0, verbose=False)
arrays = np.load(args.digits)


class MLP(pl.LightningModule):
    def __init__(self, lr: float = LR) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=0.9)


class Counted(pl.Callback):
    """What the training did, with its own clock: the optimizer steps, each validation's accuracy."""

    def __init__(self) -> None:
        self.logged: list[dict[str, float | int]] = []

    def on_train_batch_end(self, trainer: pl.Trainer, *_: Any) -> None:
        self.logged.append({"time": time.time(), "step": trainer.global_step})

    def on_validation_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        accuracy = float(trainer.callback_metrics["val_acc"])
        self.logged.append({"time": time.time(), "step": trainer.global_step, "val/accuracy": accuracy})


loggers: list[Any] = []
for name in args.loggers.split(","):
    if name == "tensorboard":
        loggers.append(pl.loggers.TensorBoardLogger(str(args.out / "tb"), name="digits"))
    elif name == "mlflow":
        loggers.append(pl.loggers.MLFlowLogger(experiment_name="digits", tracking_uri="sqlite:///mlflow.db"))
counted = Counted()
trainer = pl.Trainer(
    accelerator="cpu",
    devices=args.devices,
    strategy="ddp" if args.devices > 1 else "auto",
    max_epochs=args.epochs,
    logger=loggers,
    log_every_n_steps=args.log_every,
    callbacks=[counted],
    enable_progress_bar=False,
    enable_model_summary=False,
    enable_checkpointing=False,
)
split = {
    k: TensorDataset(torch.tensor(arrays[f"x_{k}"]), torch.tensor(arrays[f"y_{k}"]))
    for k in ("train", "validation")
}
trainer.fit(
    MLP(),
    DataLoader(split["train"], batch_size=BATCH, shuffle=True),
    DataLoader(split["validation"], batch_size=100),
)
note = {
    "rank": trainer.global_rank,
    "world_size": trainer.world_size,
    "logging": trainer.global_rank == 0,
    "killed": False,
    "steps": trainer.global_step,
    "logged": counted.logged,
}
(args.out / f"logged-rank{trainer.global_rank}.json").write_text(json.dumps(note, indent=1) + "\n")
