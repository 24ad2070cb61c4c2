"""A tracker's scalars (TensorBoard's records, MLflow's metric histories, W&B's history) as rows (one per logging
call: the values logged at one step, one after the other) and the training steps its wall times tell.

A row holds the scalars of consecutive records with the same step up to a tag it already holds, as Lightning's
loggers receive them from one ``log_metrics(metrics, step)`` call (each call logs ``epoch`` again) and a loop's
``add_scalar`` calls at one step write them; its time is its first record's. Its values are read as
Lightning's CSVLogger columns are (``lightning.cell``): ThroughputMonitor's ``train/*`` counts, evaluations by
their prefix (``val_``, ``val/``, ``test_``, ``test/``, and the Trainer's ``eval/``), anything else a training
metric kept by name; impossible values go to the quarantine by record and tag.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers import lightning
from honestscale.collector.importers._build import RankEvents, count, is_rate


@dataclass(frozen=True, slots=True)
class Scalar:
    # where the quarantine points: the record's number in the file, from 1, or the value's in its run
    record: int
    wall: float  # the logging process's time.time() when it logged the value
    step: int
    tag: str
    value: float  # finite or not: the mapping checks it


# tags that are no training metric and no evaluation: Lightning's placeholder and epoch counter, the Trainer's
# epoch, its end-of-training summary (its own rates are claims), its learning rate and gradient norm (kept by name)
_EPOCH = ("epoch", "train/epoch")
# the Hugging Face Trainer's end-of-training summary: one logging call holding train_runtime (``train/`` before each
# name where its TensorBoard and W&B callbacks write it). Only in that call is ``train_loss`` the summary's mean
# loss: anywhere else it is a training metric (Lightning's ``self.log("train_loss", ...)``, ``train_loss_step``)
SUMMARY = re.compile(r"^(train/)?(train_\w+|total_flos)$")
_SUMMARY_MARK = ("train_runtime", "train/train_runtime")
_EVAL = re.compile(r"^(?:eval|valid|validation)[/_](?P<metric>.+)$")


@dataclass
class Rows:
    rows: list[lightning.Row] = field(default_factory=list)
    # a row's line (its first record) -> the wall time of its first record, and of its last
    walls: dict[int, float] = field(default_factory=dict)
    ends: dict[int, float] = field(default_factory=dict)
    trained: set[str] = field(default_factory=set)  # the training metrics' tags
    training_rows: set[int] = field(default_factory=set)  # the lines of rows that hold a training metric
    final: dict[str, float] = field(default_factory=dict)  # the Trainer's end-of-training summary


def _raw(s: Scalar) -> str:
    return f"record {s.record}: step {s.step}, {s.tag} = {s.value!r}"


def _value(out: Parsed, s: Scalar, row: lightning.Row, got: Rows, summary: bool) -> None:
    """One scalar into its row: its epoch, an evaluation, a ThroughputMonitor count or a training metric; in the
    Trainer's end-of-training summary (``summary``), its totals and rates."""
    if s.tag in _EPOCH:
        # Lightning's epoch is whole, the Trainer's a fraction (0.0625): the epoch it is in
        epoch = count(float(math.floor(s.value))) if math.isfinite(s.value) and s.value >= 0 else None
        if epoch is None:
            out.bad.append(BadLine(s.record, _raw(s), f"tag {s.tag!r}: {s.value!r} is no epoch: left out"))
        elif row.epoch is None:
            row.epoch = epoch
        return
    if s.tag == "hp_metric":
        return
    if summary and SUMMARY.match(s.tag):
        got.final[s.tag.removeprefix("train/")] = s.value
        return
    m = _EVAL.match(s.tag)  # the Trainer's eval/loss is read as val_loss is; its eval/runtime stays a time
    tag = f"val_{m['metric']}" if m and not is_rate(m["metric"]) else s.tag
    trained: set[str] = set()
    lightning.cell(out, s.record, _raw(s), tag, s.value, row, trained)
    if trained:  # a training metric, or a rate or a time (kept by name)
        got.trained.add(s.tag)
        if not lightning.is_timing(s.tag):
            got.training_rows.add(row.line)


def rows(out: Parsed, scalars: Iterable[Scalar]) -> Rows:
    """The log's scalars as rows, in the file's order; each row's values read once the row is whole (whether it is
    the Trainer's summary depends on all its tags)."""
    got = Rows()
    row: lightning.Row | None = None
    call: list[Scalar] = []  # the row's scalars
    tags: set[str] = set()

    def read(row: lightning.Row) -> None:
        summary = any(mark in tags for mark in _SUMMARY_MARK)
        for c in call:
            _value(out, c, row, got, summary)

    for s in scalars:
        if row is None or s.step != row.step or s.tag in tags:  # another step, or another logging call at it
            if row is not None:
                read(row)
            row, call, tags = lightning.Row(s.record, None, s.step if s.step >= 0 else None), [], set()
            got.rows.append(row)
            got.walls[row.line] = s.wall
        call.append(s)
        tags.add(s.tag)
        got.ends[row.line] = s.wall
    if row is not None:
        read(row)
    return got


def merged(parts: Iterable[Rows]) -> Rows:
    """The rows of several logs of one training (a resumed run's launches, their records numbered on) as one."""
    got = Rows()
    for part in parts:
        got.rows += part.rows
        got.walls.update(part.walls)
        got.ends.update(part.ends)
        got.trained |= part.trained
        got.training_rows |= part.training_rows
        got.final.update(part.final)
    return got


def logged_steps(
    out: Parsed, got: Rows, opened: float | None = None, from_step: int | None = None
) -> list[lightning.Step]:
    """Without ThroughputMonitor: one step event per logging point of a training metric, its time the wall time
    since the point before, its iterations the steps between. The first point's interval is opened by ``opened``
    (the log's own start record: W&B's run start), its iterations the steps up to it (its step, plus 1 where the
    first point is at step 0: steps counted from 0), and it is warm-up: it holds the process's start-up between
    the log's start and the first step (the model built, the data loaders started), never a step's pace; without
    ``opened`` the first point opens the clock (the steps up to it have no time). With ``opened``, a later row at a
    step past the last point (an evaluation logged at the training's last step) closes the steps after that point
    too. ``from_step``: the step a resumed launch goes on from (its previous launch's last), the first interval's
    iterations counted from it (that launch's start-up: warm-up too). A training metric logged every N > 1 steps at
    N - 1, 2N - 1, ... is at the index of the step just taken (``_zero_based``): the first interval holds N."""
    if from_step is None and opened is not None and _zero_based(got):
        from_step = -1
    steps: list[lightning.Step] = []
    first: tuple[int, float] | None = None
    last: tuple[int, float] | None = None
    start_up = False
    backwards: list[int] = []
    for row in got.rows:
        if row.line not in got.training_rows or row.step is None:
            continue
        wall = got.walls[row.line]
        if last is not None and (row.step <= last[0] or wall < last[1]):
            backwards.append(row.line)
            continue
        if last is None:
            first = last = (row.step, wall)
            if opened is None or wall < opened:
                continue
            last = (from_step if from_step is not None else -1 if row.step == 0 else 0, opened)
            start_up = True  # the interval the log's start opens
        assert first is not None
        steps.append(_step(row, row.step, wall - (opened if opened is not None else first[1]), wall - last[1],
                           row.step - last[0], warmup=start_up))  # fmt: skip
        last, start_up = (row.step, wall), False
    if opened is not None and last is not None:
        tail = [
            r for r in got.rows if r.step is not None and r.step > last[0] and got.walls[r.line] >= last[1]
        ]
        if tail:
            end = tail[-1]
            wall = got.walls[end.line]
            assert end.step is not None
            steps.append(_step(end, end.step, wall - opened, wall - last[1], end.step - last[0]))
    if backwards:
        out.warnings.append(
            f"{len(backwards)} logging points of a training metric are at a step or a time not past the one before "
            f"(a second training into the same file?), left out: records {', '.join(map(str, backwards[:10]))}"
        )
    return steps


def _zero_based(got: Rows) -> bool:
    """The training metric logged every N > 1 steps at N - 1, 2N - 1, ...: at the index of the step just taken,
    counted from 0 (Lightning's loggers, ``for step, batch in enumerate(loader)`` loops): the first point follows N
    steps, not N - 1."""
    points = sorted({r.step for r in got.rows if r.line in got.training_rows and r.step is not None})
    every = math.gcd(*(b - a for a, b in itertools.pairwise(points))) if len(points) > 1 else 0
    return every > 1 and all(p % every == every - 1 for p in points)


def _step(
    row: lightning.Row, step: int, since_start: float, seconds: float, iterations: int, warmup: bool = False
) -> lightning.Step:
    return lightning.Step(row.line, row.epoch, step, since_start, seconds, None, iterations, warmup)


def add_rows(rank: RankEvents, got: Rows, steps: list[lightning.Step], warmup_known: bool) -> None:
    """The step events and the evaluations in the log's order: a step at its row's first wall time, an evaluation
    at its row's last (the values of one logging call are written one after the other). ``warmup_known``: the steps
    say whether they are warm-up (ThroughputMonitor's first row holds the start-up); a logging interval does not,
    except the one a log's start opens (marked warm-up: the start-up is in it), the others' unknown (None)."""
    by_line = {s.line: s for s in steps}
    for row in got.rows:
        if (s := by_line.get(row.line)) is not None:
            timed = {"epoch": s.epoch, "step": s.step, "samples": s.samples, "t_total": s.seconds}
            warmup = s.warmup if warmup_known else (True if s.warmup else None)
            rank.add(s.line, "step", got.walls[row.line], **timed, iterations=s.iterations, warmup=warmup)
        for split, metric, value in row.evals:
            said = {"split": split, "metric": metric, "value": value, "epoch": row.epoch, "step": row.step}
            rank.add(row.line, "eval", got.ends[row.line], **said)


def trainer_claim(got: Rows, said: str) -> dict[str, Any] | None:
    """The Hugging Face Trainer's own end-of-training rate (``train_samples_per_second``: the planned samples over
    ``train_runtime``, process 0's) as a claim, where the log holds a finite one; ``said``: where it was logged."""
    rate = got.final.get("train_samples_per_second")
    if rate is None or not math.isfinite(rate):
        return None
    return {"samples_per_s": rate, "from": f"{said}: the planned samples over train_runtime, process 0's"}
