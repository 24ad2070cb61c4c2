"""A tiny CPU training with Hugging Face's ``Trainer`` reporting as its users report: the generator of the Trainer
cells of the conformance matrix (tests/conformance/cells.toml; ``scripts/conformance`` runs it, under torchrun for the
cells of more than one process).

    trainer_fit.py DIGITS.npz OUT [--report-to tensorboard|mlflow] [--accumulate N] [--epochs N] [--logging-steps N]
        [--kill-at STEP] [--resume]

A small MLP on scikit-learn's digits (batch 16 per process, SGD with momentum), ``Trainer(args=TrainingArguments(
output_dir=OUT/trainer, report_to=[...], eval_strategy="epoch", logging_steps=N, gradient_accumulation_steps=N))``,
``compute_metrics`` giving ``eval_accuracy``. ``--kill-at STEP``: a checkpoint saved at that optimizer step
(``save_steps``), then the training fails (an exception, as a lost node's collective raises: exit 1); ``--resume``: a
second launch into the same ``output_dir`` with ``trainer.train(resume_from_checkpoint=True)``.

Each process writes what it did, counted by a callback of its own (its own clock), to
``OUT/logged-rank<R>[-launch<L>].json``: the expected values of the cell (tests/conformance/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

BATCH, LR = 16, 0.05

parser = argparse.ArgumentParser()
parser.add_argument("digits")
parser.add_argument("out", type=Path)
parser.add_argument("--report-to", default="tensorboard")
parser.add_argument("--accumulate", type=int, default=1)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--logging-steps", type=int, default=5)
parser.add_argument("--kill-at", type=int)
parser.add_argument("--resume", action="store_true")
options = parser.parse_args()
rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
arrays = np.load(options.digits)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        if labels is None:
            return {"logits": logits}
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}


class Digits(torch.utils.data.Dataset[dict[str, Any]]):
    def __init__(self, split: str) -> None:
        self.x, self.y = arrays[f"x_{split}"], arrays[f"y_{split}"]

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": torch.tensor(self.x[i]), "labels": int(self.y[i])}


class Failure(RuntimeError):
    pass


class Counted(TrainerCallback):
    """What the training did, with its own clock: each optimizer step, each evaluation's accuracy."""

    def __init__(self) -> None:
        self.logged: list[dict[str, float | int]] = []
        self.steps = 0

    def on_step_end(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps = state.global_step
        self.logged.append({"time": time.time(), "step": state.global_step})

    def on_save(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        if options.kill_at is not None and state.global_step >= options.kill_at and not options.resume:
            note(killed=True)
            raise Failure(f"a failure injected after step {state.global_step}'s checkpoint")

    def on_evaluate(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        accuracy = float(kwargs["metrics"]["eval_accuracy"])
        self.logged.append({"time": time.time(), "step": state.global_step, "val/accuracy": accuracy})


def accuracy(prediction: Any) -> dict[str, float]:
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


def note(killed: bool) -> None:
    launch = "-launch2" if options.resume else ("-launch1" if options.kill_at else "")
    written = {"rank": rank, "world_size": world, "logging": rank == 0, "steps": counted.steps, "killed": killed,
               "logged": counted.logged, "report_to": options.report_to, "torch": torch.__version__}  # fmt: skip
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / f"logged-rank{rank}{launch}.json").write_text(json.dumps(written, indent=1) + "\n")


counted = Counted()
training = TrainingArguments(
    output_dir=str(options.out / "trainer"),
    report_to=options.report_to.split(","),
    per_device_train_batch_size=BATCH,
    per_device_eval_batch_size=100,
    gradient_accumulation_steps=options.accumulate,
    num_train_epochs=options.epochs,
    learning_rate=LR,
    optim="sgd",
    optim_args="momentum=0.9",
    lr_scheduler_type="constant",
    eval_strategy="epoch",
    logging_steps=options.logging_steps,
    save_strategy="steps" if options.kill_at else "no",
    save_steps=options.kill_at or 500,
    use_cpu=True,
    seed=0,
    disable_tqdm=True,
    dataloader_num_workers=0,
)
trainer = Trainer(
    model=MLP(),
    args=training,
    train_dataset=Digits("train"),
    eval_dataset=Digits("validation"),
    compute_metrics=accuracy,
    callbacks=[counted],
)
trainer.train(resume_from_checkpoint=True if options.resume else None)
trainer.save_state()  # output_dir/trainer_state.json, as the Transformers example scripts save it at the end
note(killed=False)
