"""A Lightning run that logs its training loss as most LightningModules do (``self.log("train_loss", loss)``) and its
validation metrics per batch and per epoch (``on_step=True, on_epoch=True``), 2 CPU ranks (DDP over gloo), to
Lightning's TensorBoardLogger and CSVLogger side by side: the fixture beside this file.

    python examples/record/digits_npz.py /tmp/lv/digits.npz
    OMP_NUM_THREADS=1 python tests/data/imported/lightning-val-on-step/make_lightning_val_on_step.py \
        /tmp/lv/digits.npz /tmp/lv/work [OUT]

The MLP on scikit-learn's digits of ``lightning-throughput/`` (batch 10 per rank: 70 batches per rank and epoch),
3 epochs, ``log_every_n_steps=10``, validation each epoch (batch 50: 2 batches per rank), the Trainer's default
callbacks (checkpointing on), no ThroughputMonitor. With both ``on_step`` and ``on_epoch``, Lightning logs
``val_loss_step`` (one batch's value, at its count of validation batches) and ``val_loss_epoch`` (the epoch's mean,
at the training step). Rank 0 writes ``expected.json``: the values the logger was handed (``trainer.logged_metrics``
at each validation end, the steps at which ``train_loss`` was logged), counted by this script, never read back from
the logs; and copies each logger's files (TensorBoard's ``events.out.tfevents.*``, CSV's ``metrics.csv``, each with
its ``hparams.yaml``) unchanged to OUT/tensorboard-logger and OUT/csv-logger (default OUT: this folder).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

try:  # the ``lightning`` package, else the standalone ``pytorch_lightning`` one (the same code)
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
except ImportError:
    import pytorch_lightning as pl  # type: ignore[no-redef]
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger  # type: ignore[assignment]

BATCH, EPOCHS, DEVICES, LOG_EVERY = 10, 3, 2, 10


class MLP(pl.LightningModule):
    def __init__(self, lr: float = 0.1, hidden: int = 128, batch_size: int = BATCH) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)
        )

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        self.log("val_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        self.log(
            "val_acc", (logits.argmax(1) == y).float().mean(), on_step=True, on_epoch=True, sync_dist=True
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=0.9)


class Counted(Callback):
    """What rank 0 handed its loggers, as the Trainer holds it."""

    def __init__(self) -> None:
        self.train_loss_steps: list[int] = []
        self.validations: list[dict[str, Any]] = []

    def on_train_batch_end(self, trainer: pl.Trainer, *_: Any) -> None:
        # Lightning logs on_step metrics when (global_step) % log_every_n_steps == 0, after the optimizer step
        if trainer.global_step % LOG_EVERY == 0:
            self.train_loss_steps.append(trainer.global_step - 1)

    def on_validation_end(self, trainer: pl.Trainer, *_: Any) -> None:
        if trainer.sanity_checking:
            return
        logged = trainer.logged_metrics
        self.validations.append(
            {
                "step": trainer.global_step - 1,
                "epoch": trainer.current_epoch,
                "val_loss_epoch": float(logged["val_loss_epoch"]),
                "val_acc_epoch": float(logged["val_acc_epoch"]),
            }
        )


args = sys.argv[1:]
data, work = Path(args[0]), Path(args[1])
out = Path(args[2]) if len(args) > 2 else Path(__file__).resolve().parent
arrays = np.load(data)
train = TensorDataset(torch.tensor(arrays["x_train"]), torch.tensor(arrays["y_train"]))
validation = TensorDataset(torch.tensor(arrays["x_validation"]), torch.tensor(arrays["y_validation"]))
pl.seed_everything(0, workers=True)
counted = Counted()
trainer = pl.Trainer(
    accelerator="cpu", devices=DEVICES, strategy="ddp", max_epochs=EPOCHS, default_root_dir=work,
    logger=[TensorBoardLogger(work, name="tb"), CSVLogger(work, name="csv")], callbacks=[counted],
    log_every_n_steps=LOG_EVERY, enable_progress_bar=False, enable_model_summary=False,
)  # fmt: skip
trainer.fit(MLP(), DataLoader(train, batch_size=BATCH, shuffle=True), DataLoader(validation, batch_size=50))
if trainer.global_rank == 0:
    # OUT/tensorboard-logger, OUT/csv-logger: no folder named as a module beside this script (mypy would take a
    # folder "tensorboard" for the package)
    for logger, pattern in (("tb", "events.out.tfevents.*"), ("csv", "metrics.csv")):
        folder = next((work / logger).glob("version_*"))
        copy = out / {"tb": "tensorboard-logger", "csv": "csv-logger"}[logger]
        copy.mkdir(parents=True, exist_ok=True)
        for f in [*folder.glob(pattern), folder / "hparams.yaml"]:
            shutil.copyfile(f, copy / f.name)
    expected = {
        "world_size": trainer.world_size,
        "log_every_n_steps": LOG_EVERY,
        "train_loss_steps": counted.train_loss_steps,
        "validations": counted.validations,
        "global_step": trainer.global_step,
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
