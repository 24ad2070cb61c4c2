"""Held-out logs for the readers' closing check (issue 54): never fixtures, never read by the tests.

Two real trainings on one device (the lent GPU; the CPU where there is none), each written by the tool itself in
the configuration its users run, and each recorded by honestscale's callback too (one training, two records):

* Hugging Face ``Trainer``: GPT-2 from a config on bytes of this Python's standard library, evaluation every 8
  steps with ``compute_metrics`` (next-byte accuracy), a checkpoint every 16 steps, ``logging_steps=1``;
* Lightning: an MLP on scikit-learn's digits (``digits.npz`` from examples/record/digits_npz.py), ``CSVLogger``
  and ``ThroughputMonitor``, the Trainer's default callbacks (checkpointing), validation each epoch.

Beside each, ``expected.json`` holds what the script saw itself (its own callback, independent of the logs):
optimizer steps, samples, the evaluations' values, the training time. Usage (honestscale on PYTHONPATH):

    python scripts/gpu-fixtures/heldout_trainings.py DIGITS.npz OUT
"""

from __future__ import annotations

import json
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import ThroughputMonitor
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from honestscale.record.hf import HonestscaleCallback as HfRecorder
from honestscale.record.lightning import HonestscaleCallback as LightningRecorder

SEQ = 64


class Bytes(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, rows: list[torch.Tensor]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


class Seen(TrainerCallback):  # type: ignore[misc]
    """What the Trainer did, as its callbacks are told it (independent of trainer_state.json)."""

    def __init__(self) -> None:
        self.steps = 0
        self.evals: list[dict[str, float]] = []
        self.started = 0.0
        self.seconds = 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.steps += 1

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict[str, float] | None = None, **kw: Any
    ) -> None:
        self.evals.append({k: float(v) for k, v in (metrics or {}).items() if isinstance(v, int | float)})

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.seconds = time.perf_counter() - self.started


def accuracy(pred: Any) -> dict[str, float]:
    logits, labels = pred.predictions, pred.label_ids
    hits = (logits[:, :-1].argmax(-1) == labels[:, 1:]).mean()
    return {"accuracy": float(hits)}


def hf(out: Path, device: str) -> None:
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:60]
    text = b"".join(p.read_bytes() for p in files)
    rows = [torch.tensor(list(text[i : i + SEQ])) for i in range(0, len(text) - SEQ, SEQ)][:1200]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=SEQ, n_embd=128, n_layer=2, n_head=2))
    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=16, per_device_eval_batch_size=32,
                             num_train_epochs=2, learning_rate=1e-3, eval_strategy="steps", eval_steps=8,
                             logging_steps=1, save_strategy="steps", save_steps=16, report_to="none",
                             use_cpu=device == "cpu", seed=0, disable_tqdm=True)  # fmt: skip
    seen = Seen()
    recorder = HfRecorder(campaign="heldout-hf", dataset="cpython-stdlib-bytes", data_source="in_memory",
                          sequence_length=SEQ, out=str(out / "recorded"))  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=Bytes(rows[:1000]), eval_dataset=Bytes(rows[1000:]),
                      compute_metrics=accuracy, callbacks=[seen, recorder])  # fmt: skip
    trainer.train()
    trainer.save_state()
    expected = {"tool": "transformers", "device": device, "optimizer_steps": seen.steps,
                "samples": 1000 * 2, "evaluations": seen.evals, "train_seconds_seen": seen.seconds,
                "per_device_train_batch_size": 16, "world_size": 1}  # fmt: skip
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


class MLP(pl.LightningModule):
    def __init__(self, lr: float = 0.1, hidden: int = 256) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)
        )
        self.seen: dict[str, Any] = {"train_batches": 0, "samples": 0, "val_acc": []}

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        self.seen["train_batches"] += 1
        self.seen["samples"] += int(x.shape[0])
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        acc = (self.net(x).argmax(-1) == y).float().mean()
        self.log("val_acc", acc)
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            self.seen["val_acc"].append(float(self.trainer.callback_metrics["val_acc"]))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


def lightning(digits: Path, out: Path, device: str) -> None:
    data = np.load(digits)
    train = TensorDataset(torch.tensor(data["x_train"], dtype=torch.float32), torch.tensor(data["y_train"]))
    val = TensorDataset(
        torch.tensor(data["x_validation"], dtype=torch.float32), torch.tensor(data["y_validation"])
    )
    model = MLP()
    started = time.perf_counter()
    trainer = pl.Trainer(accelerator="gpu" if device == "cuda" else "cpu", devices=1, max_epochs=8,
                         logger=CSVLogger(str(out), name="lightning"), log_every_n_steps=10,
                         callbacks=[ThroughputMonitor(batch_size_fn=lambda b: b[0].size(0)),
                                    LightningRecorder(campaign="heldout-lightning", dataset="digits",
                                                      out=str(out / "recorded"))],
                         enable_progress_bar=False)  # fmt: skip
    trainer.fit(model, DataLoader(train, batch_size=10, shuffle=True), DataLoader(val, batch_size=100))
    expected = {"tool": "lightning", "device": device, "world_size": 1, "optimizer_steps": model.seen["train_batches"],
                "samples": model.seen["samples"], "val_acc": model.seen["val_acc"],
                "fit_seconds_seen": time.perf_counter() - started}  # fmt: skip
    (out / "lightning" / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    digits, out = Path(sys.argv[1]), Path(sys.argv[2])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    (out / "hf").mkdir(parents=True, exist_ok=True)
    hf(out / "hf", device)
    lightning(digits, out, device)
    versions = {"torch": torch.__version__, "lightning": pl.__version__, "device": device,
                "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None}  # fmt: skip
    import transformers

    versions["transformers"] = transformers.__version__
    (out / "versions.json").write_text(json.dumps(versions, indent=1) + "\n")
