"""Keras' TensorBoard callback (``keras.callbacks.TensorBoard(log_dir)``; Keras 3 and Keras 2's ``tf_keras``): one
training written by two TF2 writers of one process, ``<log_dir>/train/`` and ``<log_dir>/validation/``, which
TensorBoard shows as two runs. It is read as one, from what the callback writes (Keras 3.15 and tf_keras 2.21, the
conformance cells ``keras/*``):

* ``train/``: after each epoch, ``epoch_<metric>`` at the epoch's index (from 0; Keras 3 adds
  ``epoch_learning_rate``); with ``update_freq="batch"`` or N, ``batch_<metric>`` every N batches at the batches
  done (Keras' running mean over the epoch so far); a ``keras`` text, the model's config;
* ``validation/`` (with ``validation_data``): ``evaluation_<metric>_vs_iterations`` at the optimizer's iterations
  when each validation ends, then ``epoch_<metric>``, the same values at the epoch's index.

So the logging points are the batches done and each epoch's end at its validation's iterations (an epoch's
summaries sit at the iterations of the validation logged before them); the evaluations are the
``evaluation_*_vs_iterations`` values at their iterations, the epoch copies of them left out (one evaluation, not
two); the run starts where the train writer opens (``on_train_begin``), so the first interval holds the start-up
(warm-up). Without ``validation_data`` an epoch summary has no iteration count: with ``update_freq="epoch"`` the log
holds no step count, and no step event is made of it (``imported.unknown`` says so). Keras 3's callback with
``update_freq=N`` records the epoch and validation summaries only where the batches done are a multiple of N (its
``record_if`` condition stays in force): such a log holds no evaluation, and the run says so. A train/validation
pair of TF2 writers that is not Keras' is read the same way, the validation writer's values as validation values.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers._build import RankEvents, run_id
from honestscale.collector.importers._scalars import Rows, Scalar, add_rows, logged_steps, rows
from honestscale.collector.importers.tensorboard._load import Log, events_in, read_folder

FOLDERS = ("train", "validation")
TOOL = "Keras TensorBoard callback"
_BACKEND = "the Keras backend (taken as TensorFlow, whose tf.summary wrote the log)"
_WORLD = "Keras' TensorBoard callback does not write how many processes or replicas trained"
# TF2's writer: events.out.tfevents.<time>.<host>.<pid>.<n>.v2 (host.pid: the process)
_V2 = re.compile(r"^events\.out\.tfevents\.\d+\.(?P<writer>.+)\.\d+\.v2$")
_BATCH = re.compile(r"^batch_(?P<metric>.+)$")
_EPOCH = re.compile(r"^epoch_(?P<metric>.+)$")
_EVALUATION = re.compile(r"^evaluation_(?P<metric>.+)_vs_iterations$")


def writer(path: Path) -> str | None:
    m = _V2.match(path.name)
    return m["writer"] if m else None


def files(path: Path) -> tuple[list[Path], list[Path]] | None:
    """The event files of one training, where ``path`` is a TF2 writer's file in ``train/`` or ``validation/`` of a
    log dir: the train and the validation writers' files of the same process (host and pid), else None."""
    if path.parent.name not in FOLDERS or (who := writer(path)) is None:
        return None
    log_dir = path.parent.parent
    found = tuple([f for f in events_in(log_dir / folder) if writer(f) == who] for folder in FOLDERS)
    return found[0], found[1]


def _iterations_at(validation: list[Scalar]) -> dict[int, int]:
    """Each epoch's index -> the optimizer's iterations at its end: those of the validation logged before its
    ``epoch_*`` copies."""
    at: dict[int, int] = {}
    last: int | None = None
    for s in sorted(validation, key=lambda s: s.wall):
        if _EVALUATION.match(s.tag):
            last = s.step
        elif _EPOCH.match(s.tag) and last is not None:
            at.setdefault(s.step, last)
    return at


def scalars(train: list[Scalar], validation: list[Scalar]) -> tuple[list[Scalar], int]:
    """The two writers' scalars as one log, by wall time, each at the optimizer's iterations where the log tells
    them (-1: not told): ``batch_loss`` as ``train/loss``, ``evaluation_accuracy_vs_iterations`` as
    ``val_accuracy``, an epoch's training summaries by their names with its index as ``epoch``; and how many epoch
    copies of the evaluations were left out."""
    at = _iterations_at(validation)
    got: list[Scalar] = []
    marked: set[tuple[str, int]] = set()

    def epoch(s: Scalar, step: int, writer: str) -> None:
        if (writer, s.step) not in marked:  # the epoch's index, once per writer and epoch
            marked.add((writer, s.step))
            got.append(replace(s, step=step, tag="epoch", value=float(s.step)))

    for s in train:
        if m := _BATCH.match(s.tag):
            got.append(replace(s, tag=f"train/{m['metric']}"))
        elif _EPOCH.match(s.tag):
            step = at.get(s.step, -1)
            epoch(s, step, "train")
            got.append(replace(s, step=step))
        else:
            got.append(s)
    copies = 0
    for s in validation:
        if m := _EVALUATION.match(s.tag):
            got.append(replace(s, tag=f"val_{m['metric']}"))
        elif (m := _EPOCH.match(s.tag)) and s.step in at:
            copies += 1
        elif m:
            epoch(s, -1, "validation")
            got.append(replace(s, tag=f"val_{m['metric']}", step=-1))
        else:
            got.append(replace(s, tag=f"val_{s.tag}"))
    got.sort(key=lambda s: s.wall)  # stable: each writer's own order kept at a tie
    return got, copies


def _unknown(got: Rows, steps: int, tags: set[str]) -> list[str]:
    """What the callback's log cannot tell (``world_size`` first: HS215 reads it)."""
    said = [f"world_size ({_WORLD})"]
    if not steps:
        said.append(
            "the optimizer steps (the log holds no iteration count: Keras' callback logs an epoch at its index, "
            "the iterations only with validation_data or update_freq='batch' or N): no step event"
        )
    else:
        said += [
            "each step's own time (a scalar is logged every few steps: one step event per logging interval, its "
            "iterations the steps it covers; validation inside an interval is in its time)",
            "the time and samples of the steps after the last logging point",
            "samples per step",
        ]
    if not any(r.evals for r in got.rows):
        why = (
            "Keras 3's callback with update_freq=N records the epoch and validation summaries only where the "
            "batches done are a multiple of N"
            if not any(_EPOCH.match(t) for t in tags)
            else "no validation_data"
        )
        said.append(f"the evaluations (none in the log: {why})")
    return [*said, _BACKEND, "accelerator", "how the run ended"]


def read(out: Parsed, path: Path, train: list[Path], validation: list[Path], campaign: str | None) -> None:
    """The training whose files these are, read once: by the first of them (the others are read with it)."""
    owner = (train or validation)[0]
    if path != owner:
        out.read_with = owner
        out.notes.append(f"read with {owner.parent.name}/{owner.name}: one training of Keras' two writers")
        return
    logs = [read_folder(out, part) if part else Log() for part in (train, validation)]
    base = logs[0].records
    merged, copies = scalars(logs[0].scalars, [replace(s, record=s.record + base) for s in logs[1].scalars])
    tags = {s.tag for log in logs for s in log.scalars}
    got = rows(out, merged)
    if not got.rows:
        out.warnings.append("no scalar in the train and validation files: no run")
        return
    steps = logged_steps(out, got, opened=logs[0].created)
    opened = [t for t in (logs[0].created, logs[1].created, *got.walls.values()) if t is not None]
    rank = RankEvents(
        run_id("tensorboard", "|".join(f"{f.parent.name}/{f.name}" for f in train + validation)), 0
    )
    rank.add(
        1,
        "run_start",
        min(opened),
        campaign=campaign,
        name=path.parent.parent.name,
        purpose="final",
        framework="tensorflow",
        scope="end_to_end",
        hyperparameters=logs[0].hparams or None,
        imported={
            "tool": TOOL,
            "ranks_in_log": "the process that ran model.fit (the chief's, under a distribution strategy)",
            "tags": sorted(tags),
            "clock": "each scalar's wall time (the writing process's time.time() when it logged it); the run "
            "starts at the train writer's first record (on_train_begin)",
            "unknown": _unknown(got, len(steps), tags),
            "stop": "an event file does not say how or when the run ended",
        },
    )
    add_rows(rank, got, steps, warmup_known=False)
    named = ", ".join(f"{f.parent.name}/{f.name}" for f in train + validation)
    span = f" (steps {steps[0].step} to {steps[-1].step})" if steps else ""
    left = f"; {copies} epoch copies of the evaluations (epoch_* in validation/) left out" if copies else ""
    out.notes.append(
        f"{len(merged):,} scalars of {TOOL} ({named}; validation records numbered on from {base + 1}): "
        f"{len(steps)} step events{span}{left}"
    )
    out.events = rank.numbered()
