"""The evaluations of one MLPerf run: which metric each value is, and when the model it judged was trained.

* A value is named by the benchmark's catalogue entry: a plain number is its one metric; a dict
  (``{"BBOX": .., "SEGM": ..}``) or a list (v0.6 Mask R-CNN ``[bbox, segm]``, in the order of the catalogue's
  keys) holds several; a line whose ``metadata.metric`` names one (Stable Diffusion's ``FID`` and ``CLIP``, on
  lines of their own) is that metric. A benchmark the catalogue does not know keeps the log's own name
  (``metadata.metric`` or the key): its direction is unknown, never guessed from a name.
* Offline evaluation (Stable Diffusion): the checkpoints are evaluated after training, so their lines are
  stamped after ``run_stop``. The rules time a run to the checkpoint that reached the target (``run_stop`` is
  stamped there), so such an evaluation is placed at the time its checkpoint was trained: ``run_stop`` when
  run_stop names that checkpoint, else the ``block_start`` that resumed training from it, the ``block_stop``
  that reached it, or its ``checkpoint`` line. An evaluation of a checkpoint logged twice (again at
  ``run_stop``) is kept once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from honestscale import catalogue
from honestscale.collector._mlperf_lines import Record, real

EVAL_KEYS = ("eval_accuracy", "eval_error")


@dataclass(frozen=True)
class Evaluation:
    line: int
    time_ms: (
        float  # when the judged model was trained (the logged time, or its checkpoint's for offline ones)
    )
    metric: str
    value: float
    epoch: Any
    offline: bool


def _meta(rec: Record) -> dict[str, object]:
    meta = rec.get("metadata")
    return meta if isinstance(meta, dict) else {}


def quality(
    rec: Record, bench: catalogue.Benchmark | None, warnings: list[str], name: str
) -> list[tuple[str, float]]:
    """(metric, value) of one evaluation line: one per metric it holds."""
    value = rec.get("value")
    metrics = [m for m in bench.metrics if m.log_key == rec["key"]] if bench else []
    said = _meta(rec).get("metric")
    if isinstance(said, str) and not isinstance(value, dict | list):
        metrics = [m for m in metrics if m.key.lower() == said.lower() or m.name.lower() == said.lower()]
        if not metrics and bench is not None:
            warnings.append(f"{name}: {rec['key']} names metric {said!r}, which {bench.name} does not have")
    if isinstance(value, list):
        held = len(value)
        value = {m.key: v for m, v in zip(metrics, value, strict=False)} if held == len(metrics) else None
        if value is None:
            warnings.append(
                f"{name}: {rec['key']} holds {held} values; the catalogue names "
                f"{len(metrics)} metric(s): evaluation not kept"
            )
            return []
    if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), dict):
        value = next(iter(value.values()))  # v0.6 NVIDIA Mask R-CNN: {"accuracy": {"BBOX": .., "SEGM": ..}}
    if isinstance(value, dict):
        got: list[tuple[str, float]] = []
        known = {m.key: m.name for m in metrics if m.key}
        for key, v in value.items():
            if (number := real(v)) is not None:
                got.append((known.get(str(key), str(key).lower()), number))
        if not got:
            warnings.append(f"{name}: {rec['key']} value {value!r} holds no number: evaluation not kept")
        return got
    if (number := real(value)) is not None:
        if len(metrics) == 1:
            return [(metrics[0].name, number)]
        # not in the catalogue: the log's own name, whose direction nobody claims to know
        return [(said if isinstance(said, str) else rec["key"], number)]
    if isinstance(value, float):  # NaN or infinity: a diverged run
        warnings.append(f"{name}: {rec['key']} value {value!r} is not a finite number: evaluation not kept")
    return []


def _checkpoint_of(meta: dict[str, object]) -> tuple[str, Any] | None:
    for key in ("samples_count", "step_num"):
        if isinstance(meta.get(key), int) and not isinstance(meta.get(key), bool):
            return key, meta[key]
    return None


def _trained_at(
    segment: list[tuple[int, Record]], stop: Record | None, gbs: int | None
) -> dict[tuple[str, Any], float]:
    """When training reached each checkpoint the log names, by (samples_count | step_num, value)."""
    found: dict[tuple[str, Any], float] = {}
    ranked = {"block_start": 1, "block_stop": 2, "checkpoint": 3}
    best: dict[tuple[str, Any], int] = {}
    for _, rec in segment:
        rank = ranked.get(rec["key"])
        if rank is None:
            continue
        meta = _meta(rec)
        keys: list[tuple[str, Any]] = [
            ("samples_count", meta.get("samples_count")),
            ("step_num", meta.get("step_num")),
        ]
        if rec["key"] == "checkpoint":
            keys.append(("step_num", rec.get("value")))
        for key in keys:
            counted = isinstance(key[1], int) and not isinstance(key[1], bool) and key[1] > 0
            if counted and (
                rank < best.get(key, 9) or (rank == best.get(key) and rec["time_ms"] < found[key])
            ):
                found[key], best[key] = float(rec["time_ms"]), rank
    if stop is not None:
        meta = _meta(stop)
        for name in ("samples_count", "step_num"):
            if isinstance(meta.get(name), int):
                found[(name, meta[name])] = float(stop["time_ms"])
        if isinstance(step := meta.get("step_num"), int) and gbs:
            found[("samples_count", step * gbs)] = float(stop["time_ms"])
    return found


def evaluations(
    segment: list[tuple[int, Record]],
    stop: Record | None,
    bench: catalogue.Benchmark | None,
    gbs: int | None,
    warnings: list[str],
    name: str,
) -> list[Evaluation]:
    """Every evaluation of the run, each at the time its model was trained, a checkpoint's metric once."""
    stop_ms = float(stop["time_ms"]) if stop is not None else None
    trained = _trained_at(segment, stop, gbs)
    out: list[Evaluation] = []
    seen: set[tuple[str, tuple[str, Any]]] = set()
    unplaced = trailing = 0
    for number, rec in segment:
        if rec["key"] not in EVAL_KEYS:
            continue
        meta = _meta(rec)
        checkpoint = _checkpoint_of(meta)
        at, offline = float(rec["time_ms"]), stop_ms is not None and rec["time_ms"] > stop_ms
        if offline:
            placed = trained.get(checkpoint) if checkpoint else None
            if placed is not None:
                at = placed
            elif checkpoint is not None:
                unplaced += 1
            else:
                trailing += 1
        for metric, value in quality(rec, bench, warnings, name):
            if checkpoint is not None:
                if (metric, checkpoint) in seen:
                    continue  # the checkpoint's evaluation logged again (at run_stop)
                seen.add((metric, checkpoint))
            out.append(Evaluation(number, at, metric, value, meta.get("epoch_num"), offline))
    if unplaced:
        warnings.append(
            f"{name}: {unplaced} evaluation line(s) stamped after run_stop name a checkpoint the training did "
            "not log: kept at their logged time, after the run's end"
        )
    if trailing:
        warnings.append(
            f"{name}: {trailing} evaluation line(s) logged after run_stop: kept; the run's final quality is the "
            "last evaluation at or before run_stop"
        )
    return out
