"""NVIDIA DLLogger JSON logs (``DLLL {json}`` lines of its JSONStreamBackend, as NVIDIA's DeepLearningExamples
write them).

* ``"step": "PARAMETER"``: the run's parameters (``batch_size`` per GPU, ``world_size`` or ``gpus``, ``epochs``,
  ``lr``, ``arch`` ...), merged over the rows.
* ``"step": [epoch, iteration]`` with ``train.*`` (or unprefixed) data: one step event per row, its time the
  timestamp since the row before (everything between the rows counted; the first row's since the first
  ``PARAMETER`` row, where the run starts, so it holds the set-up and is the warm-up), ``train.data_time`` and
  ``train.compute_time`` as its phases where logged, its samples ``batch_size`` (per GPU) when the parameters
  say it; the first row is the warm-up, as the runners mark theirs.
* ``"step": [epoch]`` (or more) with ``val.*``/``eval.*`` data: evaluations (``val.top1`` in percent is kept as the
  accuracy fraction it is).
* ``"step": []``: the tool's summary of the whole run. It averages every iteration, the first included, so it is
  kept apart (``imported.summaries``) and HS205 names it, never used as the run's rate.

A log holds the rank that wrote it (DeepLearningExamples log on rank 0); timestamps are epoch seconds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import RankEvents, config_hash, count, number, run_id

FORMAT = "dllogger"
LABEL = "NVIDIA DLLogger log"
_LINE = re.compile(r"DLLL (\{.*)$")
_RATE = re.compile(r"(ips|throughput|samples_per_s|per_second|items_per_sec|tokens_per_s)", re.IGNORECASE)
_PERCENT = ("top1", "top5", "acc", "accuracy")
_NOT_CONFIG = re.compile(r"seed|_dir$|_path$|output|log|rank|^data$", re.IGNORECASE)


def sniff(path: Path, head: bytes) -> bool:
    return bool(re.search(rb"(?m)DLLL \{\"timestamp\"", head))


def _split_of(key: str) -> tuple[str, str] | None:
    """``val.top1`` -> (validation, top1); ``train.loss`` -> (train, loss); unprefixed -> train."""
    prefix, dot, name = key.partition(".")
    if not dot:
        return "train", key
    return {"train": "train", "val": "validation", "valid": "validation", "validation": "validation",
            "eval": "validation", "test": "test"}.get(prefix.lower(), "other"), name  # fmt: skip


Row = tuple[int, float, Any, dict[str, Any]]  # line, timestamp, step, data


@dataclass
class _Log:
    rows: list[Row] = field(default_factory=list)  # the LOG rows with a step
    params: dict[str, Any] = field(default_factory=dict)  # the PARAMETER rows, merged
    units: dict[str, Any] = field(default_factory=dict)  # metric -> the unit its METADATA row gives ("%")
    began: tuple[int, float] | None = (
        None  # the first PARAMETER row: where the log (and the run's clock) starts
    )


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
            log.params.update(rec["data"])
            log.began = log.began if log.began is not None else (n, t)
        else:
            log.rows.append((n, t, rec.get("step"), rec["data"]))
    return log


def _config_hash(params: dict[str, Any]) -> str:
    """What defines the experiment, not the seed or where it wrote; a whole argparse dump as one string: left out."""
    return config_hash({k: v for k, v in params.items()
                        if not _NOT_CONFIG.search(k) and not (isinstance(v, str) and len(v) > 200)})  # fmt: skip


def _imported(batch: int | None, world: int | None, summaries: list[Row]) -> dict[str, Any]:
    """What the log does not say, and its summary rows (kept apart: they average the warm-up in)."""
    unknown = [] if world else ["world_size (no world_size or gpus parameter)"]
    if batch is None:
        unknown.append("samples per step (no batch_size parameter)")
    rates = {k: v for r in summaries for k, v in r[3].items() if _RATE.search(k) and number(v) is not None}
    return {"tool": "DLLogger", "ranks_in_log": "the rank that wrote it (rank 0 in DeepLearningExamples)",
            "rates_from": "the timestamps between training rows", "unknown": [*unknown, "accelerator"],
            "summaries": {"includes_warmup": True, "rates": rates,
                          "values": {k: v for r in summaries for k, v in r[3].items()}} if summaries else None}  # fmt: skip


def _span(key: tuple[int, int] | None, previous: tuple[int, int] | None) -> int:
    """How many iterations a training row stands for (rows every N iterations: N; a new epoch: 1)."""
    if previous is None or key is None or key[0] != previous[0]:
        return 1
    return max(key[1] - previous[1], 1)


def _start(rank: RankEvents, log: _Log, path: Path, campaign: str | None, summaries: list[Row]) -> None:
    """run_start at the first PARAMETER row (else the first row), with what the parameters say and what they do not."""
    params = log.params
    first_line, t0 = log.began if log.began is not None else (log.rows[0][0], log.rows[0][1])
    batch = count(params.get("batch_size"), 1)
    world = count(params.get("world_size") or params.get("gpus") or params.get("num_gpus"), 1)
    epochs = count(params.get("epochs"), 1)
    rank.add(
        first_line, "run_start", t0, campaign=campaign, name=str(params.get("arch") or path.stem), purpose="final",
        framework=str(params.get("framework") or "unknown"), world_size=world, model=_str(params.get("arch")),
        config_hash=_config_hash(params),
        dataset=_str(params.get("dataset")), local_batch_size=batch,
        global_batch_size=batch * world if batch and world else None, learning_rate=number(params.get("lr")),
        optimizer=_str(params.get("optimizer")), scope="end_to_end",
        stop_criterion="epochs" if epochs else None, stop_value=float(params["epochs"]) if epochs else None,
        hyperparameters={k: v for k, v in params.items() if isinstance(v, int | float | str | bool)} or None,
        imported=_imported(batch, world, summaries),
    )  # fmt: skip


def _evaluations(rank: RankEvents, row: Row, units: dict[str, Any]) -> None:
    """A row's validation and test values as evaluations (a percentage kept as the fraction it is)."""
    at, t, step, data = row
    for k, v in data.items():
        split = _split_of(k)
        value = number(v)
        if split is None or split[0] not in ("validation", "test") or value is None:
            continue
        metric = split[1]
        in_percent = units.get(k) == "%" or (k not in units and metric.lower() in _PERCENT and value > 1.0)
        if in_percent and 0.0 <= value <= 100.0:
            value, metric = value / 100.0, f"{metric}_accuracy" if "acc" not in metric else metric
        rank.add(at, "eval", t, split=split[0], metric=metric, value=value,
                 epoch=step[0] if step and isinstance(step[0], int) else None)  # fmt: skip


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    log = _read(text, out)
    if not log.rows:
        out.warnings.append("no DLLL LOG row with a step: no run")
        return out
    rank = RankEvents(
        run_id("dllogger", json.dumps([log.params, log.rows[:3]], sort_keys=True, default=str)), 0
    )
    summaries = [r for r in log.rows if r[2] == []]
    _start(rank, log, path, campaign, summaries)
    batch = count(log.params.get("batch_size"), 1)
    previous_t = log.began[1] if log.began is not None else log.rows[0][1]
    previous_key: tuple[int, int] | None = None
    for at, t, step, data in log.rows:
        if isinstance(step, list) and len(step) >= 2 and _has(data, "train"):
            key = (int(step[0]), int(step[1])) if all(isinstance(s, int) for s in step[:2]) else None
            span = _span(key, previous_key)
            rank.add(at, "step", t, step=len(rank) - 1, epoch=key[0] if key else None,
                     samples=batch * span if batch else None, t_total=max(t - previous_t, 0.0),
                     t_data=number(data.get("train.data_time")), t_compute=number(data.get("train.compute_time")),
                     comm_measured=False, warmup=previous_key is None, iterations=span,
                     train_loss=number(data.get("train.loss", data.get("loss"))))  # fmt: skip
            previous_key = key
        elif step != [] and isinstance(step, list):
            _evaluations(rank, (at, t, step, data), log.units)
        previous_t = t
    if summaries:
        rank.add(summaries[-1][0], "run_stop", summaries[-1][1], status="success")
    else:
        out.notes.append(
            "no `[]` summary row (DeepLearningExamples log it at the end): the run is left without a stop"
        )
    out.events = rank.numbered()
    return out


def _has(data: dict[str, Any], split: str) -> bool:
    return any((s := _split_of(k)) is not None and s[0] == split for k in data)


def _is_float(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
