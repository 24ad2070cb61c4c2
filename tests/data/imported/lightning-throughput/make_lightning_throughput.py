"""A Lightning run with ThroughputMonitor and CSVLogger, 2 CPU ranks (DDP over gloo): the fixture beside this file.

    python examples/record/digits_npz.py /tmp/lt/digits.npz
    OMP_NUM_THREADS=1 python tests/data/imported/lightning-throughput/make_lightning_throughput.py \
        /tmp/lt/digits.npz /tmp/lt/work [OUT] [--default-logger | --both-loggers]

A small MLP on scikit-learn's digits (1,400 training samples, batch 10 per rank: 70 batches per rank and epoch),
2 epochs, validation each epoch (``val_acc``, ``val_loss``, synchronised over the ranks). The Trainer keeps its
default callbacks (checkpointing on: its checkpoint stays in WORK) with the progress bar and the model summary off,
and adds ``ThroughputMonitor(batch_size_fn=lambda b: b[0].size(0))`` with its defaults (a rolling window of 100
batches: its rates appear from the 100th batch on). ``log_every_n_steps=10`` as ThroughputMonitor's own example.
CSVLogger is passed explicitly (Lightning's default logger is TensorBoard's where tensorboard is installed); with
``--default-logger`` the Trainer keeps its default logger (``TensorBoardLogger`` under WORK/lightning_logs, where
tensorboard is installed) and the script copies its ``events.out.tfevents.*`` file instead of ``metrics.csv``; with
``--both-loggers`` the Trainer logs to both, ``[TensorBoardLogger, CSVLogger]`` (one training, two logs: OUT/tensorboard
and OUT/csv, each with its ``hparams.yaml``).

Lightning's subprocess launcher starts the second rank by running this script again. Every rank counts, with its own
clock, the batches and samples it trained and the time it spent in training (from ``on_train_start`` to its last
training batch, the validation loops taken out, as ThroughputMonitor's ``train/time`` is meant to be) and writes
them to WORK; rank 0 then writes ``expected.json`` beside the log (Lightning's ``version_0`` folder) and copies the
log's ``metrics.csv`` and ``hparams.yaml`` unchanged, and ``expected.json``, to OUT (default: this folder).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

try:  # the ``lightning`` package, else the standalone ``pytorch_lightning`` one (the same code)
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback, ThroughputMonitor
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
except ImportError:
    import pytorch_lightning as pl  # type: ignore[no-redef]
    from pytorch_lightning.callbacks import Callback, ThroughputMonitor  # type: ignore[assignment]
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger  # type: ignore[assignment]

BATCH, EPOCHS, DEVICES, LOG_EVERY = 10, 2, 2, 10


class MLP(pl.LightningModule):
    def __init__(self, lr: float = 0.1, hidden: int = 128, batch_size: int = BATCH) -> None:
        super().__init__()
        self.save_hyperparameters()  # Lightning's hparams.yaml beside metrics.csv
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
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=0.9)


class Clock(Callback):
    """This rank's own count of what it trained, and its own clock (time.perf_counter)."""

    def __init__(self) -> None:
        self.start = self.last_batch_end = 0.0
        self.validating_since: float | None = None
        self.validation_s = 0.0
        self.batches: list[int] = []  # per epoch
        self.samples_per_batch: list[int] = []
        self.val_acc: list[float] = []

    def on_train_start(self, trainer: pl.Trainer, *_: Any) -> None:
        self.start = time.perf_counter()

    def on_train_epoch_start(self, trainer: pl.Trainer, *_: Any) -> None:
        self.batches.append(0)

    def on_train_batch_end(self, trainer: pl.Trainer, module: Any, outputs: Any, batch: Any, *_: Any) -> None:
        self.last_batch_end = time.perf_counter()
        self.batches[-1] += 1
        self.samples_per_batch.append(int(batch[0].size(0)))

    def on_validation_start(self, trainer: pl.Trainer, *_: Any) -> None:
        if not trainer.sanity_checking:
            self.validating_since = time.perf_counter()

    def on_validation_end(self, trainer: pl.Trainer, *_: Any) -> None:
        if trainer.sanity_checking or self.validating_since is None:
            return
        self.validation_s += time.perf_counter() - self.validating_since
        self.validating_since = None
        self.val_acc.append(float(trainer.callback_metrics["val_acc"]))  # the value handed to the logger

    def on_train_end(self, trainer: pl.Trainer, *_: Any) -> None:
        self.end = time.perf_counter()


default_logger = "--default-logger" in sys.argv
both_loggers = "--both-loggers" in sys.argv
args = [a for a in sys.argv[1:] if a not in ("--default-logger", "--both-loggers")]
data, work = Path(args[0]), Path(args[1])
out = Path(args[2]) if len(args) > 2 else Path(__file__).resolve().parent
arrays = np.load(data)
train = TensorDataset(torch.tensor(arrays["x_train"]), torch.tensor(arrays["y_train"]))
validation = TensorDataset(torch.tensor(arrays["x_validation"]), torch.tensor(arrays["y_validation"]))
pl.seed_everything(0, workers=True)
clock = Clock()
logger: Any = True if default_logger else CSVLogger(work, name="throughput")
if both_loggers:
    logger = [TensorBoardLogger(work, name="tb"), CSVLogger(work, name="csv")]
trainer = pl.Trainer(
    accelerator="cpu", devices=DEVICES, strategy="ddp", max_epochs=EPOCHS, logger=logger, default_root_dir=work,
    callbacks=[ThroughputMonitor(batch_size_fn=lambda b: b[0].size(0)), clock], log_every_n_steps=LOG_EVERY,
    enable_progress_bar=False, enable_model_summary=False,
)  # fmt: skip
wall0 = time.perf_counter()
trainer.fit(
    MLP(),
    DataLoader(train, batch_size=BATCH, shuffle=True),
    DataLoader(validation, batch_size=100),
)
fit_wall_s = time.perf_counter() - wall0
mine = {
    "rank": trainer.global_rank,
    "batches_per_epoch": clock.batches,
    "samples_per_batch": clock.samples_per_batch,
    # from on_train_start to the last training batch's end, the validation loops between taken out
    "train_time_s": clock.last_batch_end - clock.start - clock.validation_s,
    "validation_s": clock.validation_s,
    "train_start_to_end_s": clock.end - clock.start,
    "fit_wall_s": fit_wall_s,
}
(work / f"rank{trainer.global_rank}.json").write_text(json.dumps(mine))
if trainer.global_rank == 0:
    deadline = time.monotonic() + 120
    files = [work / f"rank{r}.json" for r in range(trainer.world_size)]
    while not all(f.is_file() for f in files) and time.monotonic() < deadline:
        time.sleep(0.2)
    ranks = [json.loads(f.read_text()) for f in files]
    assert trainer.logger is not None
    log_dir = Path(str(trainer.logger.log_dir))
    expected = {
        "logger": type(trainer.logger).__name__,
        "written_by": {"module": pl.__name__, "lightning": getattr(pl, "__version__", None), "torch": torch.__version__,
                       "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d")},
        "world_size": trainer.world_size,
        "strategy": "ddp (gloo), CPU",
        "epochs": EPOCHS,
        "batches_per_epoch_per_rank": [r["batches_per_epoch"] for r in ranks],
        "batches_per_rank": [sum(r["batches_per_epoch"]) for r in ranks],
        "samples_per_rank_per_step": [sorted(set(r["samples_per_batch"])) for r in ranks],
        "samples_per_rank": [sum(r["samples_per_batch"]) for r in ranks],
        "total_samples": sum(sum(r["samples_per_batch"]) for r in ranks),
        "train_time_s_per_rank": [r["train_time_s"] for r in ranks],
        "validation_s_per_rank": [r["validation_s"] for r in ranks],
        "train_start_to_end_s_per_rank": [r["train_start_to_end_s"] for r in ranks],
        "fit_wall_s_rank0": fit_wall_s,
        "val_acc_logged": clock.val_acc,
        "final_val_acc": clock.val_acc[-1],
        "log_every_n_steps": LOG_EVERY,
        "throughput_window": 100,
    }  # fmt: skip
    (log_dir / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    if both_loggers:
        for each in trainer.loggers:
            where = Path(str(each.log_dir))
            sub = out / ("tensorboard" if isinstance(each, TensorBoardLogger) else "csv")
            sub.mkdir(exist_ok=True)
            for name in [p.name for p in where.glob("events.out.tfevents.*")] + [
                "metrics.csv",
                "hparams.yaml",
            ]:
                if (where / name).is_file():
                    shutil.copyfile(where / name, sub / name)
        shutil.copyfile(log_dir / "expected.json", out / "expected.json")
        print(f"wrote {out}: tensorboard/ and csv/ (Lightning's, unchanged), expected.json")
        sys.exit(0)
    logged = [p.name for p in log_dir.glob("events.out.tfevents.*")] if default_logger else ["metrics.csv"]
    for name in (*logged, "hparams.yaml", "expected.json"):
        shutil.copyfile(log_dir / name, out / name)
    print(f"wrote {out}: {', '.join(logged)}, hparams.yaml (Lightning's, unchanged), expected.json")
