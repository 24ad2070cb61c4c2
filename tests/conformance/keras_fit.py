"""A tiny CPU training with Keras' ``model.fit`` and the logger callbacks its users add: the generator of the Keras
cells of the conformance matrix (tests/conformance/cells.toml; ``scripts/conformance`` runs it in the TensorFlow
environment, ``.venv-tf``).

    keras_fit.py DIGITS.npz OUT [--logger tensorboard|csv] [--update-freq epoch|batch|N] [--epochs N] [--no-validation]

A small MLP on scikit-learn's digits (batch 16, SGD with momentum), ``model.fit(..., validation_data=...)``, with
``keras.callbacks.TensorBoard(log_dir=OUT/logs/fit, update_freq=...)`` (``--logger tensorboard``: ``epoch``, Keras'
default, ``batch``, or every N batches) or ``keras.callbacks.CSVLogger(OUT/training.log)`` (``--logger csv``).
``TF_USE_LEGACY_KERAS=1`` in the environment runs the same with Keras 2 (``tf_keras``).

What the training did, counted by a callback of its own after the logger (its own clock), and what the log holds,
read back by the tool's own reader (TensorBoard's ``EventAccumulator``; Python's ``csv`` for CSVLogger's file):
``OUT/logged-rank0.json``, the expected values of the cell (tests/conformance/README.md). The log can hold less
than the training did: Keras 3's callback with ``update_freq=N`` records the epoch and validation summaries only
where the batches done are a multiple of N, and no Keras log holds the iterations of an epoch without validation.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

BATCH, LR = 16, 0.05

parser = argparse.ArgumentParser()
parser.add_argument("digits")
parser.add_argument("out", type=Path)
parser.add_argument("--logger", choices=["tensorboard", "csv"], default="tensorboard")
parser.add_argument("--update-freq", default="epoch")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--no-validation", action="store_true")
args = parser.parse_args()
keras = tf.keras
args.out.mkdir(parents=True, exist_ok=True)
tf.random.set_seed(0)
arrays = np.load(args.digits)


class Counted(keras.callbacks.Callback):  # type: ignore[misc,name-defined]
    """What the training did, with its own clock: each optimizer step, each epoch's end and its evaluation."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0
        self.logged: list[dict[str, float | int]] = []

    def on_train_batch_end(self, batch: int, logs: dict[str, float] | None = None) -> None:
        self.steps += 1
        self.logged.append({"time": time.time(), "step": self.steps})

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        entry: dict[str, float | int] = {"time": time.time(), "step": self.steps, "epoch": epoch}
        for key, value in (logs or {}).items():
            if key.startswith("val_"):
                entry[f"val/{key.removeprefix('val_')}"] = float(value)
        self.logged.append(entry)


model = keras.Sequential(
    [keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)]
)
model.compile(
    optimizer=keras.optimizers.SGD(learning_rate=LR, momentum=0.9),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
freq: str | int = args.update_freq if args.update_freq in ("epoch", "batch") else int(args.update_freq)
logger = (
    keras.callbacks.TensorBoard(log_dir=str(args.out / "logs" / "fit"), update_freq=freq)
    if args.logger == "tensorboard"
    else keras.callbacks.CSVLogger(str(args.out / "training.log"))
)
counted = Counted()
model.fit(
    arrays["x_train"],
    arrays["y_train"],
    batch_size=BATCH,
    epochs=args.epochs,
    validation_data=None if args.no_validation else (arrays["x_validation"], arrays["y_validation"]),
    callbacks=[logger, counted],
    verbose=0,
)


def in_log() -> dict[str, object]:
    """What the log holds, by the tool's own reader: the last optimizer step it tells (None: none), and its
    evaluations of accuracy in order."""
    if args.logger == "csv":
        import csv

        with (args.out / "training.log").open(newline="") as f:
            table = list(csv.DictReader(f))
        return {
            "last_step": None,
            "evaluations": [float(r["val_accuracy"]) for r in table if r.get("val_accuracy")],
        }
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    last, evaluations = None, []
    for writer in ("train", "validation"):
        log = EventAccumulator(str(args.out / "logs" / "fit" / writer), size_guidance={"tensors": 0})
        log.Reload()
        for tag in log.Tags()["tensors"]:
            if tag.startswith("batch_") or tag.endswith("_vs_iterations"):
                last = max([last or 0, *(e.step for e in log.Tensors(tag))])
        if "evaluation_accuracy_vs_iterations" in log.Tags()["tensors"]:
            evaluations = [
                float(tf.make_ndarray(e.tensor_proto))
                for e in log.Tensors("evaluation_accuracy_vs_iterations")
            ]
    return {"last_step": last, "evaluations": evaluations}


note = {
    "rank": 0,
    "world_size": 1,
    "logging": True,
    "killed": False,
    "steps": counted.steps,
    "keras": keras.__version__ if hasattr(keras, "__version__") else tf.__version__,
    "legacy": os.environ.get("TF_USE_LEGACY_KERAS") == "1",
    "logged": counted.logged,
    "in_log": in_log(),
}
(args.out / "logged-rank0.json").write_text(json.dumps(note, indent=1) + "\n")
