"""NVIDIA DLLogger JSON logs (``DLLL {json}`` lines of its JSONStreamBackend, as NVIDIA's DeepLearningExamples
write them).

* ``"type": "METADATA"``: a metric's unit (``dllogger.metadata("val.total_ips", {"unit": "images/s"})``), which
  says what a value is: a rate or a time is never a quality.
* ``"step": "PARAMETER"``: the run's parameters (``batch_size`` per GPU, ``world_size`` or ``gpus``, ``epochs``,
  ``lr``, ``arch`` ...), merged over the rows.
* ``"step": [epoch, iteration]`` with ``train.*`` (or unprefixed) data: one step event per step key. The
  DeepLearningExamples log each iteration in one ``dllogger.log`` call per verbosity (loss and rates at DEFAULT,
  ``data_time``/``compute_time`` at VERBOSE) and their VERBOSE JSON backend writes both: the rows of one key, one
  after the other, are one step, their data merged. Its time runs from the row before the key's first (the
  previous step's end, or the last validation row) to the key's last row (everything between counted; the first
  step's from the first ``PARAMETER`` row, where the run starts, so it holds the set-up and is the warm-up, as the
  runners mark theirs); ``train.data_time`` and ``train.compute_time`` are its phases; its samples ``batch_size``
  (per GPU) when the parameters say it. A row every N iterations (DeepLearningExamples' ``--print-freq``: 1 in
  their benchmark modes, 20 in convergence) stands for the iterations since its epoch's previous row (see
  ``_span``): its samples ``batch_size`` times those, its phases the logged per-iteration means times those. An
  epoch's iterations after its last row are in no step (DLE logs them only in the ``[epoch]`` rows' means).
* ``"step": [epoch]`` (or ``[epoch, iteration]`` without training data) with ``val.*``/``eval.*``/``test.*`` data:
  evaluations. A percentage (unit ``%``, or a ``top1``/``acc`` above 1 without a unit) is kept as the fraction it
  is; a value whose unit or name says it is a rate or a time (``val.total_ips`` in images/s, ``compute_latency``
  in s) is no evaluation: the last of each is kept in ``imported.validation_measures``. A row's top-1 is added
  after its other qualities, so that it is the run's final quality. ``[epoch, iteration,
  val_iteration]`` rows are one validation batch each (DeepLearningExamples' image classification): partial
  results, counted, never evaluations.
* ``"step": []``: the tool's summary of the whole run. Its training rates average every iteration, the first
  included, so they are kept apart (``imported.summaries``) and HS205 names them, never used as the run's rate; the times and
  the training rate it says it measured (``e2e_train_time``, ``raw_train_time``, ``train.total_ips``) are
  ``claims``, beside what the run's time is measured from (``imported.time_from``).

A value that no such field can hold (NaN, a negative time, an accuracy outside [0, 1] once a percentage is a
fraction) goes to the quarantine with its line and field, and is left out; so does a step whose timestamp is
before the previous row's (no time for it). A log holds the rank that wrote it (DeepLearningExamples log on rank
0); where every rank logs, each log's PARAMETER row names its rank (``local_rank``), and the logs of one training
are its ranks (``_dllogger_ranks``). Timestamps are epoch seconds.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers import _dllogger_ranks as ranks
from honestscale.collector.importers._build import RankEvents, checked, config_hash, count, number, run_id

FORMAT = "dllogger"
LABEL = "NVIDIA DLLogger log"
_LINE = re.compile(r"DLLL (\{.*)$")
_RATE = re.compile(
    r"(?:^|_)ips$|throughput|samples_per_s|per_sec|per_second|items_per_sec|tokens_per_s", re.IGNORECASE
)
_RATE_UNIT = re.compile(r"/\s*s(?:ec(?:ond)?)?$", re.IGNORECASE)
_TIME = re.compile(r"time|latency", re.IGNORECASE)
_TIME_UNIT = re.compile(r"^(?:s|ms|us|µs|ns|sec|secs|seconds?|min|minutes?|h|hours?)$", re.IGNORECASE)
_RUN_TIME = re.compile(
    r"e2e(?:_train)?_time|(?:^|[._])(?:raw_)?(?:train|training|run|total)_time$|time_to_train", re.IGNORECASE
)
_ACCURACY = re.compile(r"^top\d+$|acc", re.IGNORECASE)
_TOPK = re.compile(r"^top\d+$", re.IGNORECASE)
_NOT_CONFIG = re.compile(r"seed|_dir$|_path$|output|log|rank|^data$", re.IGNORECASE)


def sniff(path: Path, head: bytes) -> bool:
    return bool(re.search(rb"(?m)DLLL \{\"timestamp\"", head))


def _split_of(key: str) -> tuple[str, str]:
    """``val.top1`` -> (validation, top1); ``train.loss`` -> (train, loss); unprefixed -> train."""
    prefix, dot, name = key.partition(".")
    if not dot:
        return "train", key
    return {"train": "train", "val": "validation", "valid": "validation", "validation": "validation",
            "eval": "validation", "test": "test"}.get(prefix.lower(), "other"), name  # fmt: skip


@dataclass(frozen=True)
class Row:
    line: int
    t: float
    step: Any
    data: dict[str, Any]
    raw: str


@dataclass
class _Log:
    rows: list[Row] = field(default_factory=list)  # the LOG rows with a step
    params: dict[str, Any] = field(default_factory=dict)  # the PARAMETER rows, merged
    units: dict[str, Any] = field(default_factory=dict)  # metric -> the unit its METADATA row gives ("%")
    began: tuple[int, float] | None = (
        None  # the first PARAMETER row: where the log (and the run's clock) starts
    )


@dataclass
class _Iteration:
    """The rows of one training step key, one after the other (DeepLearningExamples: DEFAULT, then VERBOSE)."""

    rows: list[Row]

    @property
    def step(self) -> Any:
        return self.rows[0].step

    @property
    def t(self) -> float:
        return self.rows[-1].t

    def key(self) -> tuple[int, int] | None:
        return _key(self.step)

    def where(self, name: str) -> Row | None:
        """The last of the rows that has ``name``."""
        return next((r for r in reversed(self.rows) if name in r.data), None)


def _key(step: Any) -> tuple[int, int] | None:
    """A training step's ``(epoch, iteration)``; None when they are not two whole numbers of at least 0."""
    pair = step[:2]
    return (
        (pair[0], pair[1])
        if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pair)
        else None
    )


@dataclass(frozen=True)
class _Numbering:
    """How a log numbers its training iterations: from 0 or from 1 in each epoch, and the most iterations between two
    of its rows (None when it has no two rows to compare)."""

    first: int
    most: int | None


def _numbering(rows: list[Row]) -> _Numbering:
    """From 0 when an iteration 0 is logged, else from 1 (DeepLearningExamples' ConvNets: ``Logger.start_epoch`` sets
    ``iteration = 0``, ``start_iteration`` adds 1 before each batch: an epoch's first is 1). A log numbered from 0
    that never logs iteration 0 (rows at 19, 39 ...) is taken as numbered from 1: its epochs' first rows one short."""
    keys = [k for k in (_key(r.step) for r in rows if _is_training(r)) if k is not None]
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(keys) if b[1] > a[1]]
    return _Numbering(0 if any(k[1] == 0 for k in keys) else 1, max(gaps, default=None))


def _is_rate(key: str, units: dict[str, Any]) -> bool:
    unit = units.get(key)
    return bool(_RATE.search(_split_of(key)[1])) or (isinstance(unit, str) and bool(_RATE_UNIT.search(unit)))


def _is_measure(key: str, units: dict[str, Any]) -> bool:
    """A rate or a time (by its unit or its name): what an evaluation pass measured of itself, never a quality."""
    unit = units.get(key)
    timed = isinstance(unit, str) and bool(_TIME_UNIT.match(unit.strip()))
    return _is_rate(key, units) or timed or bool(_TIME.search(_split_of(key)[1]))


def _record(n: int, line: str, out: Parsed) -> tuple[dict[str, Any], float] | None:
    """A DLLL line's record and its timestamp; None for another line (counted) or a broken one (said)."""
    m = _LINE.search(line)
    if m is None:
        out.other_lines += 1
        return None
    try:
        rec = json.loads(m.group(1))
    except ValueError as exc:
        out.bad.append(BadLine(n, line, f"a DLLL line that is not JSON ({exc})"))
        return None
    t = number(float(rec["timestamp"])) if isinstance(rec, dict) and _is_float(rec.get("timestamp")) else None
    if not isinstance(rec, dict) or t is None:
        out.bad.append(BadLine(n, line, 'a DLLL line without a numeric "timestamp"'))
        return None
    return rec, t


def _read(text: str, out: Parsed) -> _Log:
    log = _Log()
    for n, line in enumerate(text.splitlines(), 1):
        got = _record(n, line, out)
        if got is None:
            continue
        rec, t = got
        if rec.get("type") == "METADATA" and isinstance(rec.get("metadata"), dict):
            log.units[str(rec.get("metric"))] = rec["metadata"].get("unit")
        if rec.get("type") != "LOG" or not isinstance(rec.get("data"), dict):
            continue
        if rec.get("step") == "PARAMETER":
            log.params.update(_counted(rec["data"], n, line, out))
            log.began = log.began if log.began is not None else (n, t)
        else:
            log.rows.append(Row(n, t, rec.get("step"), rec["data"], line))
    return log


def _is_training(row: Row) -> bool:
    return isinstance(row.step, list) and len(row.step) >= 2 and _has(row.data, "train")


def _is_batch_of_validation(row: Row) -> bool:
    """``[epoch, iteration, val_iteration]``: one validation batch (DeepLearningExamples' image classification)."""
    return isinstance(row.step, list) and len(row.step) >= 3 and not _has(row.data, "train")


def _grouped(rows: list[Row]) -> list[_Iteration | Row]:
    """The rows in order, the training rows of one step key that follow each other as one iteration."""
    items: list[_Iteration | Row] = []
    for row in rows:
        last = items[-1] if items else None
        if not _is_training(row):
            items.append(row)
        elif isinstance(last, _Iteration) and last.step == row.step:
            last.rows.append(row)
        else:
            items.append(_Iteration([row]))
    return items


_COUNTS = ("batch_size", "world_size", "gpus", "num_gpus", "epochs")  # parameters that are whole numbers >= 1


def _counted(data: dict[str, Any], n: int, line: str, out: Parsed) -> dict[str, Any]:
    """A PARAMETER row's data, a value that is no finite number and a count that is no whole number of at least 1 (NaN, a word, -1) quarantined by field
    and left out (never read as "no such parameter" in silence)."""
    kept = dict(data)
    for key in [k for k, v in kept.items() if isinstance(v, float) and not math.isfinite(v)]:
        out.bad.append(BadLine(n, line, f"field {key!r}: {kept.pop(key)!r} is no finite number: the parameter is "
                               "left out"))  # fmt: skip
    for key in _COUNTS:
        if key in kept and count(kept[key], 1) is None:
            out.bad.append(BadLine(n, line, f"field {key!r}: {kept.pop(key)!r} is no count (a whole number of at "
                                   "least 1): the parameter is left out"))  # fmt: skip
    return kept


def _config_hash(params: dict[str, Any]) -> str:
    """What defines the experiment, not the seed or where it wrote; a whole argparse dump as one string: left out."""
    return config_hash({k: v for k, v in params.items()
                        if not _NOT_CONFIG.search(k) and not (isinstance(v, str) and len(v) > 200)})  # fmt: skip


def _values(rows: list[Row]) -> dict[str, Any]:
    return {k: v for r in rows for k, v in r.data.items()}


def _summaries(rows: list[Row], out: Parsed) -> list[Row]:
    """The `[]` summary rows, each number that is not finite (``NaN``, ``Infinity``) quarantined by field, never
    dropped in silence on the way to ``imported.summaries``."""
    kept = []
    for r in (r for r in rows if r.step == []):
        data = {
            k: v
            for k, v in r.data.items()
            if not isinstance(v, float) or checked(out, r.line, r.raw, k, v, what="summary value") is not None
        }
        kept.append(Row(r.line, r.t, r.step, data, r.raw))
    return kept


def _claims(summaries: list[Row], units: dict[str, Any], out: Parsed) -> dict[str, Any] | None:
    """What the tool's `[]` summary says it measured of the whole run: its clocks and its training rate."""
    got: dict[str, Any] = {}
    rates = [(r, k) for r in summaries for k in r.data
             if _split_of(k)[0] == "train" and _is_rate(k, units) and "token" not in k.lower()]  # fmt: skip
    rate = [(r, k) for r, k in rates if k == "train.total_ips"] or (rates if len(rates) == 1 else [])
    for r, k in rate[-1:]:
        got["samples_per_s"] = checked(out, r.line, r.raw, k, r.data[k], above=0.0, what="rate")
        got["samples_per_s_is"] = (
            f"{k}: the mean of its per-iteration rates, every iteration (warm-up) included"
        )
    for r in summaries:
        for k in (k for k in r.data if _RUN_TIME.search(k)):
            got[f"{k}_s"] = checked(out, r.line, r.raw, k, r.data[k], least=0.0, what="time")
    got = {k: v for k, v in got.items() if v is not None}
    return {**got, "from": "the tool's own `[]` summary rows, its clocks as it took them"} if got else None


def _time_from(log: _Log, summaries: list[Row], claims: dict[str, Any] | None) -> str:
    """What the run's time is measured from, and how the tool's own clock compares."""
    start = "the first PARAMETER row" if log.began is not None else "the first row"
    said = f"the log's timestamps, from {start} to " + (
        "the last `[]` summary row" if summaries else "no end (no `[]` summary row)"
    )
    e2e = next((v for k, v in (claims or {}).items() if k.startswith("e2e")), None)
    if e2e is None or not summaries:
        return said + "; every iteration's data loading is inside it"
    window = summaries[-1].t - (log.began[1] if log.began is not None else log.rows[0].t)
    # the summary row holds the time, so the tool's clock stopped before that row: more than the window is before it
    beside = (f"counts {e2e - window:.4g} s before the log's first row (the tool's set-up)" if e2e > window
              else f"is inside the log's window ({window - e2e:.4g} s shorter)")  # fmt: skip
    return (f"{said} ({window:.4g} s); every iteration's data loading is inside it. The tool's own end-to-end time "
            f"(claims: {e2e:.4g} s) {beside}")  # fmt: skip


def _measures(log: _Log) -> dict[str, Any]:
    """The last value of each rate and time an evaluation row holds (kept, never an evaluation)."""
    return {k: v for r in log.rows if r.step != [] and not _is_training(r) and not _is_batch_of_validation(r)
            for k, v in r.data.items()
            if _split_of(k)[0] in ("validation", "test") and _is_measure(k, log.units) and number(v) is not None}  # fmt: skip


def _between_rows(numbering: _Numbering) -> str | None:
    """What a step stands for when the training rows are further apart than one iteration."""
    if not numbering.most or numbering.most < 2:
        return None
    return (f"training rows up to {numbering.most} iterations apart (iterations numbered from {numbering.first} in "
            "each epoch): a step is the iterations since its epoch's previous row (an epoch's first row: since the "
            "epoch's start), its samples and phases (per-iteration means as logged) times those; an epoch's "
            "iterations after its last row are in no step (the tool logs them only in its `[epoch]` means)")  # fmt: skip


def _imported(
    log: _Log, batch: int | None, world: int | None, summaries: list[Row], time_from: str
) -> dict[str, Any]:
    """What the log does not say, and its summary rows (kept apart: they average the warm-up in)."""
    unknown = [] if world else ["world_size (no world_size or gpus parameter)"]
    if batch is None:
        unknown.append("samples per step (no batch_size parameter)")
    values = _values(summaries)
    rates = {k: v for k, v in values.items()
             if _split_of(k)[0] == "train" and _is_rate(k, log.units) and number(v) is not None}  # fmt: skip
    batches = len({json.dumps(r.step) for r in log.rows if _is_batch_of_validation(r)})
    ranked = ranks.rank_of(log.params)
    whose = (f"the rank that wrote it ({ranked[0]} {ranked[1]} of its PARAMETER row; each rank logs its own)"
             if ranked else "the rank that wrote it (rank 0 in DeepLearningExamples)")  # fmt: skip
    return {"tool": "DLLogger", "ranks_in_log": whose,
            "rates_from": "the timestamps between iterations (the rows of one step key, DeepLearningExamples' "
                          "DEFAULT and VERBOSE ones, are one iteration)",
            "time_from": time_from, "unknown": [*unknown, "accelerator"],
            "validation_measures": _measures(log) or None,
            "validation_batches": f"{batches} step keys [epoch, iteration, val_iteration] of one validation batch "
                                  "each: partial results, not evaluations" if batches else None,
            "summaries": {"includes_warmup": True, "rates": rates, "values": values} if summaries else None,
            **({"between_rows": between} if (between := _between_rows(_numbering(log.rows))) else {})}  # fmt: skip


def _span(key: tuple[int, int] | None, previous: tuple[int, int] | None, numbering: _Numbering) -> int:
    """How many iterations a training row stands for. DeepLearningExamples' ConvNets (image_classification/logger.py,
    ``Logger.end_iteration``) write a row when ``iteration % print_interval == 0``, its values the meters' means over
    the iterations recorded since the row before (``reset_iteration`` empties them after each row, and
    ``end_epoch`` at each epoch's end): a row is the iterations since its epoch's previous row; an epoch's first row
    those since the epoch's start (``start_epoch`` sets ``iteration = 0``; numbered from 1: ``(e, 20)`` is 20
    iterations, from 0: ``(e, 0)`` is one). Iterations numbered across epochs (a key above the previous epoch's
    last): since the previous row. Never more than the log's widest spacing (a resumed log's first row)."""
    if key is None:
        return 1
    if previous is not None and (key[0] == previous[0] or key[1] > previous[1]):
        return max(key[1] - previous[1], 1)
    since_start = key[1] - numbering.first + 1
    return max(min(since_start, numbering.most or since_start), 1)


def _start(
    rank: RankEvents, log: _Log, path: Path, campaign: str | None, summaries: list[Row], out: Parsed
) -> None:
    """run_start at the first PARAMETER row (else the first row), with what the parameters say and what they do not."""
    params = log.params
    first_line, t0 = log.began if log.began is not None else (log.rows[0].line, log.rows[0].t)
    batch = count(params.get("batch_size"), 1)
    world = count(params.get("world_size") or params.get("gpus") or params.get("num_gpus"), 1)
    epochs = count(params.get("epochs"), 1)
    claims = _claims(summaries, log.units, out)
    rank.add(
        first_line, "run_start", t0, campaign=campaign, name=str(params.get("arch") or path.stem), purpose="final",
        framework=str(params.get("framework") or "unknown"), world_size=world, model=_str(params.get("arch")),
        config_hash=_config_hash(params),
        dataset=_str(params.get("dataset")), local_batch_size=batch,
        global_batch_size=batch * world if batch and world else None, learning_rate=number(params.get("lr")),
        optimizer=_str(params.get("optimizer")), scope="end_to_end",
        stop_criterion="epochs" if epochs else None, stop_value=float(params["epochs"]) if epochs else None,
        hyperparameters={k: v for k, v in params.items() if isinstance(v, int | float | str | bool)} or None,
        claims=claims, imported=_imported(log, batch, world, summaries, _time_from(log, summaries, claims)),
    )  # fmt: skip


def _quality(row: Row, key: str, units: dict[str, Any], out: Parsed) -> tuple[str, float] | None:
    """A validation value as (metric, value), checked: a percentage (unit ``%``, or an accuracy above 1 without a
    unit) as its fraction, an accuracy within [0, 1]; None when it is none or no quality (a rate, a time)."""
    metric = _split_of(key)[1]
    if row.data[key] is None or _is_measure(key, units):
        return None
    got = checked(out, row.line, row.raw, key, row.data[key], what=metric)
    accuracy = bool(_ACCURACY.search(metric))
    if got is None or not accuracy:
        return None if got is None else (metric, got)
    if units.get(key) == "%" or (key not in units and got > 1.0):
        got = checked(out, row.line, row.raw, key, got / 100.0, least=0.0, most=1.0,
                      what=f"accuracy ({got:g} % as a fraction)")  # fmt: skip
    else:
        got = checked(out, row.line, row.raw, key, got, least=0.0, most=1.0, what="accuracy (a fraction)")
    return None if got is None else (f"{metric}_accuracy" if _TOPK.match(metric) else metric, got)


def _evaluations(rank: RankEvents, row: Row, units: dict[str, Any], out: Parsed) -> None:
    """A row's validation and test qualities as evaluations; top-1 last, so that it is the run's final one."""
    epoch = count(row.step[0]) if row.step else None
    if row.step and epoch is None:  # [NaN], [-1]: the evaluations land without an epoch, said by field
        out.bad.append(BadLine(row.line, row.raw, f"field 'step': {row.step!r} names no epoch (a whole number of at "
                               "least 0): its evaluations land without one"))  # fmt: skip
    for key in sorted(row.data, key=lambda k: "top1" in k.lower()):
        split = _split_of(key)[0]
        got = _quality(row, key, units, out) if split in ("validation", "test") else None
        if got is not None:
            rank.add(row.line, "eval", row.t, split=split, metric=got[0], value=got[1], epoch=epoch)


def _phase(it: _Iteration, name: str, span: int, out: Parsed) -> float | None:
    """A phase's time over the row's ``span`` iterations: DLE logs ``train.data_time``/``train.compute_time`` through
    ``PERF_METER``'s ``AverageMeter`` (image_classification/logger.py), the mean of one value per iteration."""
    row = it.where(name)
    got = (
        None if row is None else checked(out, row.line, row.raw, name, row.data[name], least=0.0, what="time")
    )
    return None if got is None else got * span


def _loss(it: _Iteration, out: Parsed) -> float | None:
    name = "train.loss" if it.where("train.loss") is not None else "loss"
    row = it.where(name)
    return None if row is None else checked(out, row.line, row.raw, name, row.data[name], what="loss")


@dataclass
class _Clock:
    """Where the steps stand: the last row's time, the last step's key, whether a step landed yet, and how the log
    numbers its iterations."""

    since: float
    numbering: _Numbering
    previous: tuple[int, int] | None = None
    stepped: bool = False


def _step(rank: RankEvents, it: _Iteration, clock: _Clock, batch: int | None, out: Parsed) -> None:
    """One step event of one iteration's rows (none when its timestamp is before the previous row's: said)."""
    first, last = it.rows[0], it.rows[-1]
    t_total = checked(out, last.line, last.raw, "timestamp", it.t - clock.since, least=0.0,
                      what="step time (its timestamp less the previous row's)")  # fmt: skip
    if t_total is None:
        return
    key = it.key()
    if key is None:  # [NaN, 0], [-1, 0]: no epoch and iteration a step can have (the contract refuses them)
        out.bad.append(BadLine(first.line, first.raw, f"field 'step': {it.step!r} is no (epoch, iteration) pair of "
                               "whole numbers of at least 0: the step is left out"))  # fmt: skip
        return
    span = _span(key, clock.previous, clock.numbering)
    rank.add(first.line, "step", it.t, step=len(rank) - 1, epoch=key[0] if key else None,
             samples=batch * span if batch else None, t_total=t_total,
             t_data=_phase(it, "train.data_time", span, out), t_compute=_phase(it, "train.compute_time", span, out),
             comm_measured=False, warmup=not clock.stepped, iterations=span, train_loss=_loss(it, out))  # fmt: skip
    clock.previous, clock.stepped = key, True


def _rank(path: Path, log: _Log) -> RankEvents:
    """The log's rank of its training: a log whose parameters name its rank (every rank logging) is that rank of
    the training its folder's logs of the same parameters, started together, are (``_dllogger_ranks``); any other
    log is rank 0 of a training of its own, its id made of its parameters and first rows."""
    ranked = ranks.rank_of(log.params)
    if ranked is not None and log.began is not None:
        mine = ranks.shared(log.params)
        start = ranks.training_start(path, mine, log.began[1])
        return RankEvents(run_id("dllogger", json.dumps([mine, start])), ranked[1])
    head = [[r.line, r.t, r.step, r.data] for r in log.rows[:3]]
    return RankEvents(run_id("dllogger", json.dumps([log.params, head], sort_keys=True, default=str)), 0)


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    log = _read(text, out)
    if not log.rows:
        out.warnings.append("no DLLL LOG row with a step: no run")
        return out
    rank = _rank(path, log)
    summaries = _summaries(log.rows, out)
    _start(rank, log, path, campaign, summaries, out)
    batch = count(log.params.get("batch_size"), 1)
    clock = _Clock(log.began[1] if log.began is not None else log.rows[0].t, _numbering(log.rows))
    for item in _grouped(log.rows):
        if isinstance(item, _Iteration):
            _step(rank, item, clock, batch, out)
        elif isinstance(item.step, list) and item.step != [] and not _is_batch_of_validation(item):
            _evaluations(rank, item, log.units, out)
        clock.since = item.t
    if summaries:
        rank.add(summaries[-1].line, "run_stop", summaries[-1].t, status="success")
    else:
        out.notes.append(
            "no `[]` summary row (DeepLearningExamples log it at the end): the run is left without a stop"
        )
    out.events = rank.numbered()
    return out


def _has(data: dict[str, Any], split: str) -> bool:
    return any(_split_of(k)[0] == split for k in data)


def _is_float(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
