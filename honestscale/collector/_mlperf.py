"""MLPerf ``:::MLLOG`` logs (mlcommons/logging) mapped onto honestscale events.

A result log holds ``:::MLLOG {json}`` lines mixed with any other output (shell traces,
framework warnings), each line often repeated once per rank. Each ``run_start`` .. ``run_stop``
becomes one run: a ``run_start`` event carrying the submission's hardware (from the
``systems/<system>.json`` beside the results), ``epoch`` and ``eval`` events, and a
``run_stop`` with the log's status. Repeated lines are counted once; a ``:::MLLOG`` line
that is not valid JSON is quarantined, never skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honestscale import catalogue
from honestscale import events as ev
from honestscale.collector import _mlperf_evals, _mlperf_lines, _mlperf_power
from honestscale.collector._mlperf_lines import Record, real
from honestscale.collector._mlperf_tree import (
    Place,
    find_system,
    place,
    read_system,
    run_id_for,
    scaling_factor,
    shown,
)
from honestscale.collector._parsed import Parsed

# How run_stop's status is spelt in the logs of every round, and what honestscale calls it.
_STATUS = {
    "success": "success",
    "aborted": "aborted",
    "abort": "aborted",
    "fail": "failed",
    "failed": "failed",
    "failure": "failed",
}


def _segments(records: list[tuple[int, Record]]) -> list[list[tuple[int, Record]]]:
    """Split the records into runs: each run_start opens one (what precedes it belongs to it)."""
    runs: list[list[tuple[int, Record]]] = []
    current: list[tuple[int, Record]] = []
    seen_start = False
    for rec in records:
        if rec[1].get("key") == "run_start" and seen_start:
            runs.append(current)
            current, seen_start = [], False
        if rec[1].get("key") == "run_start":
            seen_start = True
        current.append(rec)
    if current:
        runs.append(current)
    return runs


def parse(log: Path, text: str, *, campaign: str | None = None) -> Parsed:
    """Parse the text of an MLPerf result log (any round's format) into honestscale events."""
    lines = _mlperf_lines.read(text)
    out = Parsed(
        bad=lines.bad,
        other_lines=lines.other_lines,
        repeated=lines.repeated,
    )
    records = lines.records
    if not records:
        if lines.unknown_format:
            out.warnings.append(
                f"{lines.unknown_format} MLPerf lines (the first at line {lines.first_unknown}) are in a format "
                f"this reader does not know ({_mlperf_lines.FORMATS_READ}): no run"
            )
        else:
            out.warnings.append("no valid MLPerf record: no run")
        return out

    where = place(log)
    system_path = find_system(log)
    if system_path is None:
        hardware: dict[str, object] = {}
        out.warnings.append(
            f"no systems/{where.system or log.parent.parent.name}.json beside the log: hardware unknown"
        )
    else:
        hardware, note = read_system(system_path)
        if note:
            out.warnings.append(note)
            out.unread_system = (system_path, note)
    scaling, note = scaling_factor(log)
    if note:
        out.warnings.append(note)
    segments = _segments(records)
    for index, segment in enumerate(segments):
        rid, name = run_id_for(log, index, len(segments))
        power = log.parent / "power" / where.stem if len(segments) == 1 else None
        out.events.extend(
            _run_events(
                rid,
                name,
                segment,
                hardware,
                shown(system_path, where),
                where,
                power,
                scaling,
                campaign,
                out.warnings,
            )
        )
    return out


def _count(value: Any, least: int = 0) -> int | None:
    """An integer of the log usable as a count (not a bool, not past 64 bits), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and least <= value <= ev.INT_MAX:
        return value
    return None


Numbered = list[tuple[int, Record]]  # (line of the log, its record)
Events = list[tuple[int, dict[str, object]]]  # (line of the log, the event made of it)


@dataclass
class _Size:
    """How many workers the systems JSON says ran, and the batch they shared."""

    nodes: int | None
    per_node: int | None
    accelerators: int | None  # nodes x accelerators per node, where both are known
    cpu_only: bool  # Intel's Xeon submissions: counted in nodes and cores
    global_batch: int | None

    @property
    def world(self) -> int:
        return self.accelerators or (self.nodes if self.cpu_only and self.nodes else 1)

    @property
    def local_batch(self) -> int | None:
        gbs, world = self.global_batch, self.world
        known = gbs is not None and (self.accelerators or self.cpu_only) and gbs % world == 0
        return gbs // world if known and gbs is not None else None

    @property
    def world_from(self) -> str:
        if self.accelerators:
            return "systems json"
        return "systems json: CPU-only, one worker per node" if self.cpu_only else "unknown (assumed 1)"


def _size(hardware: dict[str, object], values: dict[str, object]) -> _Size:
    nodes, per_node = (
        n if isinstance(n, int) else None
        for n in (hardware.get("nodes"), hardware.get("accelerators_per_node"))
    )
    accelerators = nodes * per_node if nodes and per_node else None
    return _Size(
        nodes,
        per_node,
        accelerators,
        per_node == 0 and bool(nodes),
        _count(values.get("global_batch_size"), 1),
    )


def _values(segment: Numbered) -> dict[str, object]:
    """Each key's first point-in-time value in the run's segment of the log."""
    values: dict[str, object] = {}
    for _, rec in segment:
        if rec["event_type"] == "POINT_IN_TIME" and rec["key"] not in values:
            values[rec["key"]] = rec.get("value")
    return values


def _bounds(
    segment: Numbered, name: str, warnings: list[str]
) -> tuple[tuple[int, Record], tuple[int, Record] | None]:
    """The run's start (run_start, else its first timed line, said) and its first run_stop (run_final, a status or a
    later eval after it are not a second stop)."""
    start = next(((n, r) for n, r in segment if r["key"] == "run_start"), None)
    if start is None:
        warnings.append(f"{name}: no run_start record (the run did not get past initialisation)")
        # v0.6 stamps submission_* lines 0.0: never a start time
        start = next(((n, r) for n, r in segment if r["time_ms"] > 0), segment[0])
    return start, next(((n, r) for n, r in segment if r["key"] == "run_stop"), None)


def _benchmark(
    values: dict[str, object], where: Place, name: str, warnings: list[str]
) -> tuple[str, catalogue.Benchmark | None]:
    """The benchmark the log names (else its folder) and its catalogue entry for the round, if there is one."""
    benchmark = str(values.get("submission_benchmark") or (where.within[-1] if where.within else "unknown"))
    bench = catalogue.mlperf(benchmark, where.round, where.suite)
    if bench is None:
        warnings.append(
            f"{name}: benchmark {benchmark!r} of round {where.round or 'unknown'} is not in the catalogue: "
            "its quality is landed under the log's own name, with no target and no direction (HS101 cannot "
            "verify it)"
        )
    return benchmark, bench


def _event(rid: str, kind: str, time_ms: float, **fields: Any) -> dict[str, object]:
    """An event of the run (rank 0; numbered in the log's order at the end)."""
    e = {
        "schema": ev.SCHEMA_VERSION,
        "run_id": rid,
        "rank": 0,
        "seq": 0,
        "time": time_ms / 1000.0,
        "kind": kind,
    }
    # a NaN anywhere (a diverged loss in a hyper-parameter, a status) would make the line invalid JSON: null
    e.update({k: v for k, v in ev.finite_json(fields).items() if v is not None})
    return e


def _start_fields(values: dict[str, object], hardware: dict[str, object], size: _Size, benchmark: str,
                  bench: catalogue.Benchmark | None) -> dict[str, object]:  # fmt: skip
    """run_start's fields as the log, its systems JSON and the catalogue give them."""
    lr = next((v for k, v in values.items() if k.endswith("opt_base_learning_rate")), None)
    first = bench.metrics[0] if bench else None
    return {
        "purpose": "final", "framework": hardware.get("framework") or "unknown", "world_size": size.world,
        "nodes": size.nodes, "accelerators_per_node": size.per_node, "accelerator": hardware.get("accelerator"),
        "cores_per_node": hardware.get("cores_per_node"), "system": hardware.get("system"), "cpu": hardware.get("cpu"),
        "interconnect": hardware.get("interconnect"), "software": hardware.get("software"),
        "model": bench.name if bench else benchmark, "dataset": bench.dataset if bench else None,
        "train_size": _count(values.get("train_samples")), "validation_size": _count(values.get("eval_samples")),
        "data_source": "filesystem", "global_batch_size": size.global_batch, "local_batch_size": size.local_batch,
        "optimizer": values.get("opt_name") if isinstance(values.get("opt_name"), str) else None,
        "learning_rate": real(lr), "seed": _count(values.get("seed"), ev.INT_MIN), "stop_criterion": "target_accuracy",
        "stop_value": first.target if first else None, "target_metric": first.name if first else None,
        "scope": "end_to_end",
        "hyperparameters": {k: v for k, v in values.items()
                         if not k.startswith("submission_") and isinstance(v, int | float | str | bool)} or None,
    }  # fmt: skip


def _mlperf_fields(values: dict[str, object], where: Place, benchmark: str, bench: catalogue.Benchmark | None,
                   size: _Size, system_shown: str | None, scaling: float | None, joules: float | None) -> dict[str, object]:  # fmt: skip
    """run_start's ``mlperf`` block: where the log sits in the results, its targets and where each number came from."""
    targets = [{"metric": m.name, "better": m.better, "target": m.target, "unit": m.unit}
               for m in (bench.metrics if bench else ())]  # fmt: skip
    return {
        "suite": where.suite, "round": where.round, "round_folder": where.round_folder,
        "org": values.get("submission_org") or where.org, "division": values.get("submission_division"),
        "status": values.get("submission_status"), "platform": values.get("submission_platform"),
        "benchmark": benchmark, "targets": targets or None, "system_description": system_shown,
        "world_size_from": size.world_from, "scaling_factor": scaling,
        "energy_from": f"power logs power/{where.stem}/ (node_*.txt, sw_*.txt)" if joules else None,
    }  # fmt: skip


def _epochs_and_stop(segment: Numbered, stop: tuple[int, Record] | None, rid: str, name: str,
                     bench: catalogue.Benchmark | None, last: dict[str, float], joules: float | None,
                     warnings: list[str]) -> Events:  # fmt: skip
    """Each epoch (its time where its start is logged) and the run's stop with its status (a success whose last
    evaluation misses the target is said)."""
    out: Events = []
    epoch_starts: dict[Any, float] = {}
    for number, rec in segment:
        key, meta = rec["key"], rec.get("metadata") or {}
        epoch = _count(meta.get("epoch_num") if isinstance(meta, dict) else None)
        if key == "epoch_start" and epoch is not None:
            epoch_starts[epoch] = rec["time_ms"]
        elif key == "epoch_stop" and epoch is not None:
            began = epoch_starts.get(epoch)
            t_total = (
                (rec["time_ms"] - began) / 1000.0 if began is not None and rec["time_ms"] >= began else None
            )
            out.append((number, _event(rid, "epoch", rec["time_ms"], epoch=epoch, t_total=t_total)))
        elif key == "run_stop" and stop is not None and rec is stop[1]:
            out.append((number, _stop_event(rec, rid, name, bench, last, joules, warnings)))
    return out


def _stop_event(rec: Record, rid: str, name: str, bench: catalogue.Benchmark | None,
                last: dict[str, float], joules: float | None, warnings: list[str]) -> dict[str, object]:  # fmt: skip
    """The run's stop with the status the log gives (no status: failed); a success whose last evaluation misses
    the target is said."""
    meta = rec.get("metadata") or {}
    said = meta.get("status") if isinstance(meta, dict) else None
    status = _STATUS.get(str(said).strip().lower(), "failed") if said is not None else "failed"
    if status == "success" and bench is not None:
        missed = [m.describe() for m in bench.metrics if m.name in last and not m.reached(last[m.name])]
        if missed:
            warnings.append(
                f"{name}: run_stop says success but the last evaluation misses {', '.join(missed)}"
            )
    reason = None if status == "success" else f"MLPerf run_stop status {said!r}"
    return _event(rid, "run_stop", rec["time_ms"], status=status, reason=reason, energy_j=joules)


def _run_events(
    rid: str,
    name: str,
    segment: Numbered,
    hardware: dict[str, object],
    system_shown: str | None,
    where: Place,
    power: Path | None,
    scaling: float | None,
    campaign: str | None,
    warnings: list[str],
) -> Events:
    """One run of an MLPerf log as events: its start (with what the systems JSON and the catalogue say), its
    evaluations, epochs and stop, numbered in the log's order."""
    values = _values(segment)
    start, stop = _bounds(segment, name, warnings)
    benchmark, bench = _benchmark(values, where, name, warnings)
    size = _size(hardware, values)
    joules = None
    if power is not None and power.is_dir() and stop is not None:
        got = _mlperf_power.energy(power, float(start[1]["time_ms"]), float(stop[1]["time_ms"]))
        warnings.extend(f"{name}: {w}" for w in got.warnings)
        joules = got.joules
    mlperf = _mlperf_fields(values, where, benchmark, bench, size, system_shown, scaling, joules)
    fields = _start_fields(values, hardware, size, benchmark, bench)
    out: Events = [(start[0], _event(rid, "run_start", start[1]["time_ms"], campaign=campaign, name=name, **fields,
                             mlperf=mlperf))]  # fmt: skip
    evals = _mlperf_evals.evaluations(
        segment, stop[1] if stop else None, bench, size.global_batch, warnings, name
    )
    samples = _count(values.get("eval_samples"))
    for e in evals:
        fields = {"split": "validation", "metric": e.metric, "value": e.value, "epoch": _count(e.epoch)}
        out.append((e.line, _event(rid, "eval", e.time_ms, **fields, samples=samples)))
    stop_ms = float(stop[1]["time_ms"]) if stop else math.inf
    last = {e.metric: e.value for e in sorted(evals, key=lambda e: e.time_ms) if e.time_ms <= stop_ms}
    out += _epochs_and_stop(segment, stop, rid, name, bench, last, joules, warnings)
    # events in the log's order (evaluations were read first): seq follows the file
    out[1:] = sorted(out[1:], key=lambda pair: pair[0])
    for i, (_, made) in enumerate(out):
        made["seq"] = i
    return out
