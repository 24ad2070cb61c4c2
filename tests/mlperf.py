"""Helpers of the MLPerf tests: the data sets under ``../shared/data`` (``data_root``, ``result_files``), what
mlperf-logging (the independent reader, a dev dependency) reads from a result file (``reference``) and what its result
summarizer scores a submission (``official_score``), the round of a file or folder (``round_of``), a round's
compliance target (``compliance_target``) and the multi-scale series' times (``scaling_series``, for
tests/data/mlperf-v2.0-scaling and benchmarks/scaling_models.py)."""

from __future__ import annotations

import ast
import contextlib
import csv
import functools
import gzip
import importlib
import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from honestscale import catalogue
from tests.tools import require

try:  # the independent reader, a dev dependency: CI must never skip the comparisons with it
    mlp_parser: Any = importlib.import_module("mlperf_logging.compliance_checker.mlp_parser")
    summarizer: Any = importlib.import_module("mlperf_logging.result_summarizer.result_summarizer")
except ImportError as missing:
    require(False, f"mlperf-logging ({missing})", "pip install -e '.[dev]'", module=True)

CHECKS = Path(mlp_parser.__file__).parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def data_root(name: str) -> Path:
    """The MLPerf logs in ``../shared/data/<name>``: a test without them is skipped, or failed in CI."""
    root = DATA / name
    require(root.is_dir(), f"the MLPerf logs at {root}", "../shared/data beside the repository")
    return root


def result_files(root: Path) -> list[Path]:
    """The result files under ``root`` (``[<round>/]<org>/results/<system>/<benchmark>/result_*.txt``), each by its
    resolved path, as the store names its source."""
    return sorted(p.resolve() for p in root.glob("**/results/*/*/result_*.txt"))


def round_of(path: Path) -> str:
    """The round of a result file or of a submission folder (``<round>/<org>/results/<system>/<benchmark>``)."""
    rnd = catalogue.round_of(path.parts[path.parts.index("results") - 2])
    assert rnd is not None
    return rnd


def _accelerators(lines: list[Any], path: Path) -> int:
    """The summarizer's accelerator count; for NVIDIA's v0.6 system files, which are not JSON and which it cannot
    read, the log's own ``submission_entry`` (num_nodes x num_accelerators of its ``nodes``)."""
    try:
        desc = summarizer._load_system_desc(str(path.parents[3]), path.parents[1].name)
        # v0.7's descriptions spell the key "number of nodes" (the summarizer's own table would miss it)
        return int(desc["accelerators_per_node"]) * int(
            desc.get("number_of_nodes", desc.get("number of nodes"))
        )
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


@functools.cache
def reference(path: Path) -> dict[str, Any]:
    """What mlperf-logging reads from one result file (v0.6 timestamps in seconds, later rounds in ms); read once a
    process (a test reads it again for its submission's score), not to be changed by its user."""
    rnd = round_of(path)
    lines, failed = mlp_parser.parse_file(str(path), f"{rnd}.0")
    # v0.6: lines glued to other output are cut by our reader alike
    assert not failed or rnd == "0.6", failed[:2]
    per_second = 1.0 if rnd == "0.6" else 1000.0
    stops = [ll for ll in lines if ll.key == "run_stop"]
    try:  # the summarizer's own time to train
        start, stop = summarizer._query_run_start_stop(lines)
        seconds: float | None = (stop - start) / per_second
    except ValueError:  # run_stop not recorded
        seconds = None
    gbs = next(ll.value["value"] for ll in lines if ll.key == "global_batch_size")
    return {
        "seconds": seconds,
        "status": stops[0].value["metadata"].get("status") if stops else None,
        "gbs": gbs,
        "accelerators": _accelerators(lines, path),
        "final": _final(lines, stops[0] if stops else None, gbs),
        "benchmark": summarizer._benchmark_alias(path.parent.name),
    }


def official_score(folder: Path) -> tuple[float | None, float | None, str]:
    """The result summarizer's own score of a submission folder (minutes, times ``scaling.json``'s factor; None where
    it gives none), the factor it applied, and what it said: what it printed, and the error it stopped on."""
    benchmark = summarizer._benchmark_alias(folder.name)
    with contextlib.redirect_stdout(io.StringIO()) as said:
        try:
            score, _, factor = summarizer._compute_strong_score_standalone(
                benchmark, folder.parent.name, False, str(folder), "training", f"{round_of(folder)}.0"
            )
        except FileNotFoundError as exc:  # v0.6: a benchmark its rules have no file for
            return None, None, f"{said.getvalue()}{exc}"
    return score, factor, said.getvalue()


def compliance_target(benchmark: str, rnd: str) -> tuple[str, float] | None:
    """The direction and target in the round's compliance rule ``ATLEAST_ONE_CHECK`` on eval_accuracy."""
    path = CHECKS / f"training_{rnd}.0" / f"closed_{benchmark}.yaml"
    if not path.is_file():
        return None
    m = re.search(r"ATLEAST_ONE_CHECK: \"\(?v\['value'\] (<=|>=) ([0-9.]+)", path.read_text())
    return ("lower" if m[1] == "<=" else "higher", float(m[2])) if m else None


def scaling_series(folder: Path) -> dict[str, dict[int, list[float]]]:
    """Each series of a folder made by scripts/mlperf-scaling-series (its MANIFEST.tsv): every successful run's time
    to train in seconds (run_stop - run_start, the summarizer's own query) per accelerator count (the system file's
    nodes x accelerators per node). Each log is read from a decompressed copy: mlperf-logging takes a plain file."""
    rows = list(csv.DictReader((folder / "MANIFEST.tsv").open(), delimiter="\t"))
    accelerators = {}
    for r in rows:
        if r["path"].endswith(".json"):
            desc = json.loads((folder / r["path"]).read_text())
            accelerators[Path(r["path"]).stem] = int(desc["number_of_nodes"]) * int(
                desc["accelerators_per_node"]
            )
    out: dict[str, dict[int, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "result_0.txt"
        for r in rows:
            if not r["path"].endswith(".txt"):
                continue
            copy.write_bytes(gzip.decompress((folder / (r["path"] + ".gz")).read_bytes()))
            lines, _ = mlp_parser.parse_file(str(copy), "2.0.0")
            start, stop = summarizer._query_run_start_stop(lines)
            if next(ll for ll in lines if ll.key == "run_stop").value["metadata"]["status"] != "success":
                continue  # an aborted run (its target not reached) has no time to train
            workers = accelerators[r["path"].split("/")[3]]
            out.setdefault(r["series"], {}).setdefault(workers, []).append((stop - start) / 1000)
    return out
