"""MLPerf ``:::MLLOG`` logs (mlcommons/logging) mapped onto honestscale events.

A result log holds ``:::MLLOG {json}`` lines mixed with any other output (shell traces,
framework warnings), each line often repeated once per rank. Each ``run_start`` .. ``run_stop``
becomes one run: a ``run_start`` event carrying the submission's hardware (from the
``systems/<system>.json`` beside the results), ``epoch`` and ``eval`` events, and a
``run_stop`` with the log's status. Repeated lines are counted once; a ``:::MLLOG`` line
that is not valid JSON is quarantined, never skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.runners import events as ev

MARK = ":::MLLOG"

# Quality targets of MLPerf Training v0.7 (the closed division rules), per benchmark:
# (dataset, metric, target). A log does not say its round; the targets of v0.7 also hold for
# ResNet in v0.6 - v3.x.
BENCHMARKS: dict[str, tuple[str, str, float]] = {
    "resnet": ("imagenet", "top1_accuracy", 0.759),
    "ssd": ("coco2017", "mAP", 0.23),
    "maskrcnn": ("coco2017", "bbox_mAP", 0.377),
    "minigo": ("go", "win_rate", 0.50),
    "gnmt": ("wmt16_en_de", "BLEU", 24.0),
    "transformer": ("wmt17_en_de", "BLEU", 25.0),
    "bert": ("wikipedia", "masked_lm_accuracy", 0.712),
    "dlrm": ("criteo_terabyte", "AUC", 0.8025),
}

_PLACEHOLDERS = {"", "todo", "tbd", "n/a", "na", "none", "unknown", "cpuname", "core_count"}


@dataclass
class BadLine:
    line: int
    raw: str
    reason: str


@dataclass
class Parsed:
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (source line, event)
    bad: list[BadLine] = field(default_factory=list)
    other_lines: int = 0
    repeated: int = 0
    warnings: list[str] = field(default_factory=list)


def _clean(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in _PLACEHOLDERS:
        return None
    return value


def _int(value: Any) -> int | None:
    value = _clean(value)
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def find_system(log: Path) -> Path | None:
    """``<submitter>/systems/<system>.json`` for ``<submitter>/results/<system>/<benchmark>/result_N.txt``."""
    system = log.parent.parent.name
    for ancestor in log.parents:
        candidate = ancestor / "systems" / f"{system}.json"
        if candidate.is_file():
            return candidate
    return None


def read_system(path: Path) -> tuple[dict[str, Any], str | None]:
    """Hardware and software fields of a system description, and a note if it could not be read."""
    try:
        desc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {}, f"system description {path} unreadable ({exc}): hardware unknown"
    if not isinstance(desc, dict):
        return {}, f"system description {path} is not a JSON object: hardware unknown"
    nodes = _int(desc.get("number_of_nodes", desc.get("number of nodes")))
    per_node = _int(desc.get("accelerators_per_node"))
    software: dict[str, str] = {}
    stacks = desc.get("other_software_stack")
    if isinstance(stacks, dict):
        stacks = [stacks]
    if isinstance(stacks, list):
        for stack in stacks:
            if isinstance(stack, dict):
                for key, value in stack.items():
                    if _clean(value) is not None:
                        software[key.removesuffix("_version")] = str(value)
    if "cuda_driver" in software:
        software["driver"] = software.pop("cuda_driver")
    if _clean(desc.get("operating_system")) is not None:
        software["os"] = str(desc["operating_system"])
    fields = {
        "system": _clean(desc.get("system_name")) or path.stem,
        "framework": _clean(desc.get("framework")),
        "nodes": nodes,
        "accelerators_per_node": per_node,
        "accelerator": _clean(desc.get("accelerator_model_name")),
        "cpu": _clean(desc.get("host_processor_model_name")),
        "interconnect": _clean(desc.get("host_networking")),
        "software": software or None,
    }
    return fields, None


def _segments(records: list[tuple[int, dict[str, Any]]]) -> list[list[tuple[int, dict[str, Any]]]]:
    """Split the records into runs: each run_start opens one (what precedes it belongs to it)."""
    runs: list[list[tuple[int, dict[str, Any]]]] = []
    current: list[tuple[int, dict[str, Any]]] = []
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


def run_id_for(log: Path, index: int, count: int) -> tuple[str, str]:
    """A stable run id and name: ``mlperf:<submitter>/<system>/<benchmark>/<result>`` in a submission tree."""
    parts = log.parts
    stem = log.name.split(".")[0]
    if len(parts) >= 5 and parts[-4] == "results":
        name = f"{parts[-3]}/{parts[-2]}/{stem}"
        rid = f"mlperf:{parts[-5]}/{name}"
    else:
        name = stem
        rid = f"mlperf:{log.parent.name}/{stem}"
    if count > 1:
        rid, name = f"{rid}#{index + 1}", f"{name}#{index + 1}"
    return rid, name


def parse(log: Path, text: str, *, campaign: str | None = None) -> Parsed:
    """Parse the text of an MLPerf result log into honestscale events."""
    out = Parsed()
    records: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        at = line.find(MARK)
        if at < 0:
            if line.strip():
                out.other_lines += 1
            continue
        body = line[at + len(MARK) :].strip()
        if body in seen:
            out.repeated += 1
            continue
        seen.add(body)
        try:
            rec = json.loads(body)
        except json.JSONDecodeError as exc:
            out.bad.append(
                BadLine(number, line, f"MLLOG line is not valid JSON: {exc.msg} at column {exc.colno}")
            )
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
            out.bad.append(BadLine(number, line, "MLLOG record without a 'key' string"))
            continue
        if not isinstance(rec.get("time_ms"), int | float) or isinstance(rec.get("time_ms"), bool):
            out.bad.append(BadLine(number, line, f"MLLOG record {rec['key']!r} without a numeric 'time_ms'"))
            continue
        records.append((number, rec))
    if not records:
        out.warnings.append("no valid :::MLLOG record: no run")
        return out

    system_path = find_system(log)
    if system_path is None:
        hardware: dict[str, Any] = {}
        out.warnings.append(f"no systems/{log.parent.parent.name}.json beside the log: hardware unknown")
    else:
        hardware, note = read_system(system_path)
        if note:
            out.warnings.append(note)
    segments = _segments(records)
    for index, segment in enumerate(segments):
        rid, name = run_id_for(log, index, len(segments))
        out.events.extend(_run_events(rid, name, segment, hardware, system_path, campaign, out.warnings))
    return out


def _run_events(
    rid: str,
    name: str,
    segment: list[tuple[int, dict[str, Any]]],
    hardware: dict[str, Any],
    system_path: Path | None,
    campaign: str | None,
    warnings: list[str],
) -> list[tuple[int, dict[str, Any]]]:
    values: dict[str, Any] = {}
    for _, rec in segment:
        if rec.get("event_type", "POINT_IN_TIME") == "POINT_IN_TIME" and rec["key"] not in values:
            values[rec["key"]] = rec.get("value")
    start = next(((n, r) for n, r in segment if r["key"] == "run_start"), None)
    if start is None:
        warnings.append(f"{name}: no run_start record (the run did not get past initialisation)")
        start = segment[0]
    benchmark = str(values.get("submission_benchmark") or "unknown")
    dataset, metric, target = BENCHMARKS.get(benchmark, (None, "accuracy", None))
    nodes, per_node = hardware.get("nodes"), hardware.get("accelerators_per_node")
    n_acc = nodes * per_node if nodes and per_node else None
    gbs = values.get("global_batch_size")
    world = n_acc or 1
    seq = 0

    def event(kind: str, time_ms: float, **fields: Any) -> dict[str, Any]:
        nonlocal seq
        e = {
            "schema": ev.SCHEMA_VERSION,
            "run_id": rid,
            "rank": 0,
            "seq": seq,
            "time": time_ms / 1000.0,
            "kind": kind,
        }
        e.update({k: v for k, v in fields.items() if v is not None})
        seq += 1
        return e

    lr = next((v for k, v in values.items() if k.endswith("opt_base_learning_rate")), None)
    hyper = {
        k: v
        for k, v in values.items()
        if not k.startswith("submission_") and isinstance(v, int | float | str | bool) and v is not None
    }
    out = [
        (
            start[0],
            event(
                "run_start",
                start[1]["time_ms"],
                campaign=campaign,
                name=name,
                purpose="final",
                framework=hardware.get("framework") or "unknown",
                world_size=world,
                nodes=nodes,
                accelerators_per_node=per_node,
                accelerator=hardware.get("accelerator"),
                system=hardware.get("system"),
                cpu=hardware.get("cpu"),
                interconnect=hardware.get("interconnect"),
                software=hardware.get("software"),
                model=benchmark,
                dataset=dataset,
                train_size=values.get("train_samples")
                if isinstance(values.get("train_samples"), int)
                else None,
                validation_size=values.get("eval_samples")
                if isinstance(values.get("eval_samples"), int)
                else None,
                data_source="filesystem",
                global_batch_size=gbs if isinstance(gbs, int) and gbs > 0 else None,
                local_batch_size=gbs // world
                if isinstance(gbs, int) and n_acc and gbs % world == 0
                else None,
                optimizer=values.get("opt_name") if isinstance(values.get("opt_name"), str) else None,
                learning_rate=lr if isinstance(lr, int | float) and not isinstance(lr, bool) else None,
                seed=values.get("seed") if isinstance(values.get("seed"), int) else None,
                stop_criterion="target_accuracy",
                stop_value=target,
                target_metric=metric,
                scope="end_to_end",
                hyperparameters=hyper or None,
                mlperf={
                    "org": values.get("submission_org"),
                    "division": values.get("submission_division"),
                    "status": values.get("submission_status"),
                    "platform": values.get("submission_platform"),
                    "benchmark": benchmark,
                    "system_description": str(system_path) if system_path else None,
                    "world_size_from": "systems json" if n_acc else "unknown (assumed 1)",
                },
            ),
        )
    ]
    epoch_starts: dict[Any, float] = {}
    for number, rec in segment:
        key, meta = rec["key"], rec.get("metadata") or {}
        epoch = meta.get("epoch_num") if isinstance(meta, dict) else None
        epoch = epoch if isinstance(epoch, int) and epoch >= 0 else None
        if key == "epoch_start" and epoch is not None:
            epoch_starts[epoch] = rec["time_ms"]
        elif key == "epoch_stop" and epoch is not None:
            began = epoch_starts.get(epoch)
            t_total = (
                (rec["time_ms"] - began) / 1000.0 if began is not None and rec["time_ms"] >= began else None
            )
            out.append((number, event("epoch", rec["time_ms"], epoch=epoch, t_total=t_total)))
        elif key == "eval_accuracy" and isinstance(rec.get("value"), int | float):
            samples = values.get("eval_samples")
            out.append(
                (
                    number,
                    event(
                        "eval",
                        rec["time_ms"],
                        split="validation",
                        metric=metric,
                        value=float(rec["value"]),
                        epoch=epoch,
                        samples=samples if isinstance(samples, int) else None,
                    ),
                )
            )
        elif key == "run_stop":
            status = meta.get("status") if isinstance(meta, dict) else None
            status = status if status in ev.STATUSES else "failed"
            reason = None if status == "success" else f"MLPerf run_stop status {meta.get('status')!r}"
            out.append((number, event("run_stop", rec["time_ms"], status=status, reason=reason)))
    return out
