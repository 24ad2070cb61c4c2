"""Helpers of the MLPerf tests: what mlperf-logging (the independent reader, a dev dependency) reads from a result
file (``reference``), the round of a file (``round_of``) and a round's compliance target (``compliance_target``)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from honestscale import catalogue

mlp_parser = pytest.importorskip("mlperf_logging.compliance_checker.mlp_parser")
summarizer = pytest.importorskip("mlperf_logging.result_summarizer.result_summarizer")

CHECKS = Path(mlp_parser.__file__).parents[1]


def round_of(path: Path) -> str:
    rnd = catalogue.round_of(path.parts[path.parts.index("results") - 2])
    assert rnd is not None
    return rnd


def _accelerators(lines: list[Any], path: Path) -> int:
    """The summarizer's accelerator count; for NVIDIA's v0.6 system files, which are not JSON and which it cannot
    read, the log's own ``submission_entry`` (num_nodes x num_accelerators of its ``nodes``)."""
    try:
        desc = summarizer._load_system_desc(str(path.parents[3]), path.parents[1].name)
        return int(desc["accelerators_per_node"]) * int(desc["number_of_nodes"])
    except (json.JSONDecodeError, TypeError):  # its own error path raises a TypeError on a non-JSON file
        entry = next(ll.value["value"] for ll in lines if ll.key == "submission_entry")
        nodes = ast.literal_eval(ast.literal_eval(entry)["nodes"])
        return int(nodes["num_nodes"]) * int(nodes["num_accelerators"])


def _final(lines: list[Any], stop: Any, gbs: int) -> dict[str, Any]:
    """The quality a run stopped at, by the log's own names: the evaluation of the checkpoint run_stop names
    (offline evaluation: Stable Diffusion), else the last evaluation at or before run_stop (all when none)."""
    evals = [ll for ll in lines if ll.key == "eval_accuracy"]
    if stop is not None and any("metric" in ll.value["metadata"] for ll in evals):
        meta = stop.value["metadata"]
        at = meta.get("samples_count", meta.get("step_num", 0) * gbs)
        return {
            ll.value["metadata"]["metric"]: ll.value["value"]
            for ll in evals
            if ll.value["metadata"].get("samples_count") == at
        }
    if any("metric" in ll.value["metadata"] for ll in evals):  # no run_stop: the last of each metric
        return {ll.value["metadata"]["metric"]: ll.value["value"] for ll in evals}
    if stop is not None:
        evals = [ll for ll in evals if ll.timestamp <= stop.timestamp]
    return {"": evals[-1].value["value"]} if evals else {}


def reference(path: Path) -> dict[str, Any]:
    """What mlperf-logging reads from one result file (v0.6 timestamps in seconds, later rounds in ms)."""
    rnd = round_of(path)
    lines, failed = mlp_parser.parse_file(str(path), f"{rnd}.0")
    assert not failed or rnd == "0.6", failed[
        :2
    ]  # v0.6: lines glued to other output are cut by our reader alike
    per_second = 1.0 if rnd == "0.6" else 1000.0
    starts = [ll for ll in lines if ll.key == "run_start"]
    stops = [ll for ll in lines if ll.key == "run_stop"]
    gbs = next(ll.value["value"] for ll in lines if ll.key == "global_batch_size")
    return {
        "seconds": (stops[0].timestamp - starts[0].timestamp) / per_second if stops else None,
        "status": stops[0].value["metadata"].get("status") if stops else None,
        "gbs": gbs,
        "accelerators": _accelerators(lines, path),
        "final": _final(lines, stops[0] if stops else None, gbs),
        "benchmark": summarizer._benchmark_alias(path.parent.name),
    }


def compliance_target(benchmark: str, rnd: str) -> tuple[str, float] | None:
    """The direction and target in the round's compliance rule ``ATLEAST_ONE_CHECK`` on eval_accuracy."""
    path = CHECKS / f"training_{rnd}.0" / f"closed_{benchmark}.yaml"
    if not path.is_file():
        return None
    m = re.search(r"ATLEAST_ONE_CHECK: \"\(?v\['value'\] (<=|>=) ([0-9.]+)", path.read_text())
    return ("lower" if m[1] == "<=" else "higher", float(m[2])) if m else None
