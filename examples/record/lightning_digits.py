"""A Lightning MLP on digits, recorded by honestscale's callback: lightning_digits.py DATA.npz LOGS [DEVICES]

DATA.npz: examples/record/digits_npz.py writes it. LOGS: Lightning's CSVLogger folder (its own metrics.csv).
"""

import sys

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from honestscale.record.lightning import HonestscaleCallback


class MLP(pl.LightningModule):
    def __init__(self, lr: float = 0.1, hidden: int = 128) -> None:
        super().__init__()
        self.save_hyperparameters()  # Lightning's hparams.yaml beside metrics.csv
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)
        )

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean(), sync_dist=True)

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("test_acc", (self.net(x).argmax(1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=0.9)


arrays = np.load(sys.argv[1])
split = {k: TensorDataset(torch.tensor(arrays[f"x_{k}"]), torch.tensor(arrays[f"y_{k}"])) for k in ("train", "validation", "test")}  # fmt: skip
devices = int(sys.argv[3]) if len(sys.argv) > 3 else 2
callback = HonestscaleCallback(
    campaign="lightning-digits", dataset="digits", test=True, data_source="in_memory"
)
trainer = pl.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto", max_epochs=2,
                     logger=CSVLogger(sys.argv[2], name="digits"), log_every_n_steps=1, callbacks=[callback],
                     enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)  # fmt: skip
model = MLP()
trainer.fit(
    model,
    DataLoader(split["train"], batch_size=32, shuffle=True),
    DataLoader(split["validation"], batch_size=100),
)
trainer.test(model, DataLoader(split["test"], batch_size=100))
