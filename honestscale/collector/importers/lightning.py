"""Lightning's ``CSVLogger``: ``metrics.csv`` (+ ``hparams.yaml`` beside it), written by global rank 0 only.

``metrics.csv`` has one row per logging call: ``epoch``, ``step`` (the global step) and a column per metric logged
(``train_loss``, ``val_acc``, ``test_acc``, ...), empty where a row does not hold it. A metric logged with
``sync_dist=True`` is the mean over ranks, any other is rank 0's. ``val*`` columns are validation evaluations,
``test*`` test ones, at their epoch and step; a rate or a time (``*_per_sec``, ``throughput``, ``*/time``) is never
a quality.

With Lightning's ``ThroughputMonitor`` callback the file also holds, every ``log_every_n_steps``, rank 0's own
count (it runs on rank 0 alone): ``train/time`` (seconds since ``on_train_start``, perf_counter, the validation
loops taken out), ``train/batches`` and ``train/samples`` (rank 0's, since the start), and from its
``window_size``-th batch on (100 by default) its rates over the last window: ``train/device/samples_per_sec``
(rank 0's) and, in a world of more than one, ``train/samples_per_sec`` = rank 0's × the world size. So:

* each row with ``train/time`` is a step event of rank 0: its time the difference from the row before (the first
  from the start: the warm-up), its samples ``train/samples``' growth where logged (unknown where not), its
  ``iterations`` the steps it covers (``log_every_n_steps``); a row where ``train/time`` goes back while the step
  goes on (a second fit into the same log) starts anew, said in a warning; the run starts at the file's
  modification time minus the training time and its events are placed on that clock (evaluations at the last
  training row before them); steps after the last logged row have no time, and ``imported.unknown`` says so;
* the world size is ``train/samples_per_sec / train/device/samples_per_sec`` when that is the same whole number on
  every row with a per-device rate, and 1 where rows have the per-device rate and none the global one (Lightning
  logs the global rates in every world of more than one); anything else (no rates yet, a row without the global rate, ratios that
  differ) leaves it unknown, and ``imported.unknown`` says why;
* the tool's global rate is kept as a claim named "rank 0's × world size", never as the run's rate.

Without ThroughputMonitor the file holds no time: every event is placed at the file's modification time. Either
way there is no wall clock, no accelerator, no other rank's numbers and no end marker: the run is left without a stop
(``imported.stop`` says the log does not tell how or when it ended, even where its last step is timed), and what
the log cannot tell is listed in ``imported.unknown``. Impossible values (NaN, inf, a word, a negative time or
count, an accuracy outside [0, 1]) go to the quarantine by line and field; a row with more or fewer fields than
the header goes there whole (its values cannot be told apart); the rest of the file is read.

The framework is ``torch`` and a quality is named as the rules name it (``val_acc`` -> ``accuracy``), as
honestscale's Lightning callback records the same training (``imported.tool`` names Lightning): the two records of
one training are then told to be one (collector/_twins.py).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import (
    RankEvents,
    checked,
    count,
    is_rate,
    quality_bounds,
    ragged,
    raw_row,
    run_id,
)
from honestscale.events import quality_name

FORMAT = "lightning-metrics"
LABEL = "Lightning CSVLogger metrics.csv"
RECORD = "honestscale.record.lightning.HonestscaleCallback"
_SPLITS = (("val_", "validation"), ("val/", "validation"), ("test_", "test"), ("test/", "test"))
# ThroughputMonitor's columns: <stage>/[device/]<what> (its default separator: with another, "train_time" could be
# anyone's metric, so those columns are read as any other)
_MONITOR = re.compile(
    r"^(?P<stage>train|validate|test|predict)/(?P<device>device/)?"
    r"(?P<what>time|batches|samples|lengths|(?:batches|samples|items|flops)_per_sec|mfu)$"
)
_CLAIM = "rank 0's × world size"
_TIME = re.compile(r"[/.]time$")


@dataclass(slots=True)
class Row:
    """One row of metrics.csv that could be read: its line, epoch and step, ThroughputMonitor's training values
    (``time``, ``samples``, ``device/samples_per_sec``, ...) and its evaluations (split, metric, value)."""

    line: int
    epoch: int | None
    step: int | None
    monitor: dict[str, float] = field(default_factory=dict)
    evals: list[tuple[str, str, float]] = field(default_factory=list)


@dataclass(slots=True)
class Step:
    """A step event: the rows' differences of train/time, train/samples and the step."""

    line: int
    epoch: int | None
    step: int
    at: float  # train/time at its end
    seconds: float
    samples: int | None
    iterations: int
    warmup: bool  # the first row of a start of training: the start-up is in it


def sniff(path: Path, head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    columns = first.split(",")
    return "step" in columns and "epoch" in columns and len(columns) > 2 and not first.startswith("{")


def hparams_yaml(path: Path) -> dict[str, object]:
    """``hparams.yaml`` beside the CSV: its scalar values (numbers, strings, booleans)."""
    file = path.with_name("hparams.yaml")
    if not file.is_file():
        return {}
    import yaml

    try:
        got = yaml.safe_load(file.read_text(encoding="utf-8", errors="replace"))
    except yaml.YAMLError:
        return {}
    if not isinstance(got, dict):
        return {}
    return {str(k): v for k, v in got.items() if isinstance(v, int | float | str | bool)}


def _index(out: Parsed, line: int, raw: str, name: str, text: Any) -> int | None:
    """The row's epoch or step: a whole number at least 0, else quarantined by field (None)."""
    value = checked(out, line, raw, name, text, least=0.0, what=name)
    got = count(value)
    if value is not None and got is None:
        out.bad.append(
            BadLine(line, raw, f"field {name!r}: {value!r} is no whole number: the {name} is left out")
        )
    return got


def _monitored(out: Parsed, line: int, raw: str, key: str, text: object, into: Row) -> None:
    """A ThroughputMonitor column: its training values kept (the other stages' only checked: rank 0's counts)."""
    m = _MONITOR.match(key)
    assert m is not None
    what, device = m["what"], bool(m["device"])
    most = 1.0 if what == "mfu" else None
    kind = {"time": "time", "mfu": "MFU"}.get(what, "rate" if what.endswith("_per_sec") else "count")
    value = checked(out, line, raw, key, text, least=0.0, most=most, what=kind)
    if value is not None and m["stage"] == "train":
        into.monitor[("device/" if device else "") + what] = value


def is_timing(key: str) -> bool:
    """A rate or a time (``*_per_sec``, ``train/time``): kept by name, never a quality."""
    return is_rate(key) or bool(_TIME.search(key))


def cell(out: Parsed, line: int, raw: str, key: str, text: object, into: Row, trained: set[str]) -> None:
    """One field of a row: a ThroughputMonitor value, an evaluation, or a training metric (its name kept)."""
    if _MONITOR.match(key):
        _monitored(out, line, raw, key, text, into)
        return
    timing = is_timing(key)
    split = next((s for prefix, s in _SPLITS if key.startswith(prefix)), None)
    metric = next((key.removeprefix(p) for p, _ in _SPLITS if key.startswith(p)), key)
    least, most = (0.0, None) if timing else quality_bounds(metric)
    value = checked(
        out, line, raw, key, text, least=least, most=most, what="rate or time" if timing else metric
    )
    if value is None:
        return
    if split is None or timing:
        trained.add(key)
    elif metric.endswith("_step"):  # self.log(..., on_step=True, on_epoch=True) in an evaluation loop
        said = (
            f"{key}: Lightning's value of one evaluation batch, logged at its count of evaluation batches (not the "
            f"training step), is no evaluation of the model: left out; {key.removesuffix('_step')}_epoch, the "
            "epoch's value, is the evaluation"
        )
        if said not in out.notes:
            out.notes.append(said)
    else:  # Lightning's epoch value beside a per-batch one is <name>_epoch: the evaluation named <name>
        into.evals.append((split, quality_name(metric.removesuffix("_epoch")), value))


def _read(out: Parsed, text: str) -> tuple[list[str], list[Row], set[str]]:
    """The header, the rows that could be read, and the training metrics' names; ragged rows quarantined whole."""
    reader = csv.DictReader(io.StringIO(text, newline=""))  # a lone CR ends a row, never raises
    rows: list[Row] = []
    trained: set[str] = set()
    for row in reader:
        line = reader.line_num  # a quoted field may span lines: the row's last line
        if (bad := ragged(row, reader.fieldnames, line)) is not None:
            out.bad.append(bad)
            continue
        raw = raw_row(row)
        got = Row(
            line,
            _index(out, line, raw, "epoch", row.get("epoch")),
            _index(out, line, raw, "step", row.get("step")),
        )
        for key, value in row.items():
            if key not in ("epoch", "step") and value:
                cell(out, line, raw, key, value, got, trained)
        rows.append(got)
    return list(reader.fieldnames or ()), rows, trained


@dataclass
class _Clock:
    """Where the rows before left ThroughputMonitor's counts: train/time and train/samples since the current start
    (a second fit into the same log starts them again), the training time of the starts before, the last step."""

    at: float = 0.0
    before: float = 0.0
    samples: int | None = 0
    step: int | None = None
    starts: list[int] = field(default_factory=list)  # lines where train/time starts again
    skipped: list[int] = field(default_factory=list)  # lines of rows with train/time that are no step


def monitor_steps(out: Parsed, rows: list[Row]) -> list[Step]:
    """One step event per row with train/time: the differences from the row before (the first from the start,
    where ThroughputMonitor's counts begin, and so a row where train/time starts again)."""
    steps: list[Step] = []
    c = _Clock()
    for row in rows:
        t = row.monitor.get("time")
        if t is None:
            continue
        samples, batches = count(row.monitor.get("samples")), count(row.monitor.get("batches"))
        step = row.step if row.step is not None else (batches - 1 if batches else None)
        if step is None or (c.step is not None and step <= c.step):
            c.skipped.append(row.line)
            continue
        start = c.step is None or t <= c.at
        if start and c.step is not None:
            c.before, c.at, c.samples = c.before + c.at, 0.0, 0
            c.starts.append(row.line)
        # the steps since the row before; the first row's since the start (a resumed run counts batches anew)
        span = step - c.step if c.step is not None else (min(step + 1, batches) if batches else step + 1)
        grown = samples - c.samples if samples is not None and c.samples is not None else None
        steps.append(
            Step(
                row.line,
                row.epoch,
                step,
                c.before + t,
                t - c.at,
                grown if grown is None or grown >= 0 else None,
                span,
                start,
            )
        )
        c.at, c.samples, c.step = t, samples, step
    _said(out, c)
    return steps


def _said(out: Parsed, c: _Clock) -> None:
    """The rows with train/time that are no step, and where train/time starts again, as warnings."""
    if c.skipped:
        out.warnings.append(
            f"{len(c.skipped)} rows with train/time are no step after the row before (no step, or a step not past "
            f"the one before: a second fit into the same log?), left out: lines {_lines(c.skipped)}"
        )
    if c.starts:
        out.warnings.append(
            f"train/time starts again at lines {_lines(c.starts)} (a second fit into the same log, or a value out "
            "of place): each read as a new start of training, its first row a warm-up, the starts' times added up"
        )


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:10])) + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")


def world_from_rates(rows: list[Row], columns: list[str]) -> tuple[int | None, str]:
    """The world size ThroughputMonitor's rates tell (the same whole ratio of its global to its per-device rate on
    every row with a per-device rate), and how; else None and why it cannot be told."""
    rated = [r.monitor for r in rows if r.monitor.get("device/samples_per_sec")]
    if not rated:
        return None, (
            "no row has ThroughputMonitor's rates (it logs them from its window_size-th batch on, 100 by default)"
            if any(r.monitor for r in rows)
            else "the log holds no ThroughputMonitor columns"
        )
    ratios = [m["samples_per_sec"] / m["device/samples_per_sec"] for m in rated if "samples_per_sec" in m]
    globals_ = [c for c in columns if c.endswith("/samples_per_sec") and "/device/" not in c]
    if not ratios and globals_:
        return None, (
            f"train/device/samples_per_sec on {len(rated)} rows and no train/samples_per_sec beside it, "
            f"though {', '.join(globals_)} is a global rate (a world of more than one): the world is not said"
        )
    if not ratios:  # Lightning's Throughput: "Global metrics are not included if the world size is 1"
        return 1, (
            f"train/device/samples_per_sec on {len(rated)} rows and train/samples_per_sec on none: ThroughputMonitor "
            "logs the global rates in every world of more than one (lightning.fabric.utilities.throughput: global "
            "metrics are not included if the world size is 1)"
        )
    whole = round(ratios[0])
    if len(ratios) == len(rated) and whole >= 1 and all(abs(r - whole) <= 1e-6 * whole for r in ratios):
        return (
            whole,
            f"train/samples_per_sec / train/device/samples_per_sec: {whole} on each of its {len(ratios)} rows",
        )
    return None, (
        f"train/samples_per_sec / train/device/samples_per_sec is not one whole number on every row "
        f"({min(ratios):g} to {max(ratios):g} on {len(ratios)} of the {len(rated)} rows with a rate)"
    )


def rate_claims(rows: list[Row]) -> dict[str, object] | None:
    """The tool's own global rate, rank 0's × world size: a claim, never the run's rate."""
    rated = [r for r in rows if r.monitor.get("samples_per_sec") is not None]
    if not rated:
        return None
    last = rated[-1]
    return {
        "samples_per_s": last.monitor["samples_per_sec"],
        "rank0_samples_per_s": last.monitor.get("device/samples_per_sec"),
        "samples_per_s_is": _CLAIM,
        "from": f"{_CLAIM}: ThroughputMonitor's train/samples_per_sec at step {last.step} (line {last.line}), "
        "rank 0's samples per second over its last window of batches multiplied by the world size; no "
        "other rank is timed",
    }


def local_batch(steps: list[Step]) -> int | None:
    """Rank 0's samples per step when every step event says the same whole number."""
    per = {s.samples / s.iterations if s.samples is not None else None for s in steps}
    got = per.pop() if len(per) == 1 else None
    return int(got) if got is not None and got.is_integer() and got >= 1 else None


def what_is_unknown(
    rows: list[Row], steps: list[Step], world: int | None, why_world: str, local: int | None
) -> list[str]:
    """What metrics.csv cannot tell, each with why (``world_size`` first where unknown: HS215 reads it)."""
    unknown = [] if world is not None else [f"world_size ({why_world}: record the run with {RECORD})"]
    if not steps:
        unknown += ["step times", "wall clock"]
    else:
        unknown.append(
            "wall clock (train/time counts from the start of training: the start is placed at the "
            "file's modification time minus the training time)"
        )
        if any(s.iterations > 1 for s in steps):
            unknown.append(
                "each step's own time (train/time is logged every log_every_n_steps: one step event per "
                "logged row, its iterations the steps it covers)"
            )
        last = max((r.step for r in rows if r.step is not None), default=steps[-1].step)
        if last > steps[-1].step:
            unknown.append(
                f"the time of steps {steps[-1].step + 1} to {last} (after the last train/time row)"
            )
        if any(s.samples is None for s in steps):
            unknown.append("the samples of the step events whose row has no train/samples")
        unknown.append("the time spent in validation (ThroughputMonitor takes it out of train/time)")
    unknown.append("batch size" if local is None else "the other ranks' batch sizes (the global batch)")
    return [*unknown, "accelerator", "the other ranks' numbers", "how the run ended"]


def _imported(
    columns: list[str], steps: list[Step], unknown: list[str], why_world: str, world: int | None
) -> dict[str, object]:
    ranks = (
        "global rank 0 (metrics logged with sync_dist are the mean over ranks, the others rank 0's; "
        "ThroughputMonitor's columns are rank 0's alone, its global rates rank 0's × world size)"
    )
    got: dict[str, object] = {
        "tool": "Lightning CSVLogger" + (" with ThroughputMonitor" if steps else ""),
        "ranks_in_log": ranks,
        "columns": columns,
        "unknown": unknown,
    }
    if not steps:
        got["clock"] = (
            "none: metrics.csv holds no time; every event is placed at the file's modification time, "
            "and the run is left without a stop (no time to train)"
        )
        got["stop"] = "metrics.csv does not say how or when the run ended (no time in it)"
        return got
    last = steps[-1]
    got["clock"] = (
        "ThroughputMonitor's train/time: rank 0's training time since on_train_start (perf_counter, "
        "the validation loops taken out); no wall clock: the start is placed at the file's "
        "modification time minus the training time, each step at its train/time after it, each "
        "evaluation at the last training row before it"
    )
    got["stop"] = (
        f"metrics.csv does not say how or when the run ended (no end marker: its last training row is "
        f"step {last.step}, at {last.at:.3f} s of train/time, line {last.line})"
    )
    got["last_train_time_s"] = last.at
    got["last_timed_step"] = last.step
    if world is not None:
        got["world_size_from"] = why_world
    return got


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    text = text.removeprefix("\ufeff")
    columns, rows, trained = _read(out, text)
    if not rows:
        out.warnings.append("no row could be read: no run" if out.bad else "a header and no rows: no run")
        return out
    steps = monitor_steps(out, rows)
    world, why_world = world_from_rates(rows, columns)
    local = local_batch(steps)
    end = path.stat().st_mtime
    t0 = end - (steps[-1].at if steps else 0.0)
    version = path.parent.name
    name = (
        f"{path.parent.parent.name} {version}" if version.startswith("version_") else (version or "lightning")
    )
    hparams = hparams_yaml(path)
    rank = RankEvents(run_id("lightning", text), 0)
    unknown = what_is_unknown(rows, steps, world, why_world, local)
    rank.add(
        1,
        "run_start",
        t0,
        campaign=campaign,
        name=name,
        purpose="final",
        framework="torch",
        scope="end_to_end",
        hyperparameters=hparams or None,
        world_size=world,
        local_batch_size=local,
        claims=rate_claims(rows),
        imported=_imported(
            [c for c in columns if c not in ("epoch", "step")], steps, unknown, why_world, world
        ),
    )
    _events(rank, rows, steps, t0 if steps else end)
    if steps:
        spans = sorted({s.iterations for s in steps})
        out.notes.append(
            f"ThroughputMonitor's train/time: {len(steps)} step events of rank 0 (steps {steps[0].step} to "
            f"{steps[-1].step}, {steps[-1].at:.3f} s of training), each the difference from the row before "
            f"(covering {', '.join(map(str, spans))} steps); world size "
            + (f"{world} ({why_world})" if world is not None else f"unknown ({why_world})")
        )
    if trained:
        out.notes.append(
            "training metrics and rates kept only as the columns' names (rank 0's unless synchronised): "
            + ", ".join(sorted(trained))
        )
    out.events = rank.numbered()
    return out


def _events(rank: RankEvents, rows: list[Row], steps: list[Step], t0: float) -> None:
    """The step events and the evaluations in the file's order, each evaluation at the last step before it."""
    by_line = {s.line: s for s in steps}
    clock = t0
    for row in rows:
        s = by_line.get(row.line)
        if s is not None:
            clock = t0 + s.at
            rank.add(
                s.line,
                "step",
                clock,
                epoch=s.epoch,
                step=s.step,
                samples=s.samples,
                t_total=s.seconds,
                iterations=s.iterations,
                warmup=s.warmup,
            )
        for split, metric, value in row.evals:
            rank.add(
                row.line,
                "eval",
                clock,
                split=split,
                metric=metric,
                value=value,
                epoch=row.epoch,
                step=row.step,
            )
