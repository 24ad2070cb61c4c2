"""MLPerf Training v0.7 result logs (Dell EMC C4140 at 1, 2, 4 nodes; Google 8xV100 TF2) land as one run each.

Expected values are read from the logs and system descriptions by this test's own parsing,
independent of the collector.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, counts, query


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if ":::MLLOG" in line:
            out.append(json.loads(line.split(":::MLLOG", 1)[1]))
    return out


def _expected(path: Path) -> dict[str, Any]:
    recs = _records(path)
    start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
    stop = next(r for r in recs if r["key"] == "run_stop")
    evals = [r["value"] for r in recs if r["key"] == "eval_accuracy"]
    system = path.parents[3] / "systems" / f"{path.parents[1].name}.json"
    desc = json.loads(system.read_text())
    nodes = int(desc.get("number_of_nodes", desc.get("number of nodes")))
    return {
        "ttt": (stop["time_ms"] - start) / 1000.0,
        "status": stop["metadata"]["status"],
        "gbs": next(r["value"] for r in recs if r["key"] == "global_batch_size"),
        "final": evals[-1],
        "n_evals": len({(r["time_ms"], r["value"]) for r in recs if r["key"] == "eval_accuracy"}),
        "n_acc": nodes * int(desc["accelerators_per_node"]),
        "nodes": nodes,
        "accelerator": desc["accelerator_model_name"],
    }


@pytest.fixture(scope="module")
def ingested(mlperf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("mlperf") / "s.duckdb"
    result = cli("ingest", mlperf, "--store", store, "--campaign", "mlperf-v0.7")
    assert result.returncode == 0, result.stderr
    return store


def _logs(mlperf: Path) -> list[Path]:
    logs = sorted(mlperf.glob("*/results/*/*/result_*.txt"))
    assert len(logs) == 20
    return logs


def test_one_run_per_result_file_matching_the_log(mlperf: Path, ingested: Path) -> None:
    """Each of the 20 result files is one run of the campaign whose time, status, batch (global and per
    accelerator), accelerators, nodes, accelerator model and final top-1 accuracy are this test's own reading of
    the log and the system description (mlperf-logging's reading: test_mlperf_official.py)."""
    runs = json.loads(cli("runs", "--store", ingested, "--format", "json").stdout)
    by_file = {r["source_file"]: r for r in runs}
    assert len(runs) == 20
    for log in _logs(mlperf):
        run, exp = by_file[str(log.resolve())], _expected(log)
        assert run["source"] == "mlperf"
        assert run["campaign"] == "mlperf-v0.7"
        assert run["time_to_train_s"] == pytest.approx(exp["ttt"], rel=0.005)
        assert run["status"] == exp["status"]
        assert run["n_accelerators"] == exp["n_acc"]
        assert run["n_nodes"] == exp["nodes"]
        assert run["accelerator"] == exp["accelerator"]
        assert run["global_batch_size"] == exp["gbs"]
        assert run["local_batch_size"] == exp["gbs"] // exp["n_acc"]
        assert run["final_accuracy"] == {
            "split": "validation",
            "metric": "top1_accuracy",
            "value": exp["final"],
        }
        assert run["started_at"].endswith("Z")


def test_dell_scaling_series_has_4_8_16_v100s(ingested: Path) -> None:
    """Dell's C4140 at 1, 2 and 4 nodes: 4, 8 and 16 V100s, 5 runs each."""
    rows = query(
        ingested,
        "SELECT system, n_nodes, n_accelerators, count(*) FROM runs WHERE system LIKE '%C4140' GROUP BY ALL ORDER BY 3",
    )
    assert rows == [("C4140", 1, 4, 5), ("2xC4140", 2, 8, 5), ("4xC4140", 4, 16, 5)]


def test_repeated_lines_count_once_and_hardware_comes_from_systems_json(mlperf: Path, ingested: Path) -> None:
    """An evaluation logged twice is one evaluation; CUDA, NCCL, CPU and interconnect come from the system
    description, the target and data set from the log."""
    log = mlperf / "DellEMC" / "results" / "4xC4140" / "resnet" / "result_0.txt"
    rid = "mlperf:mlperf-training-v0.7/DellEMC/4xC4140/resnet/result_0"
    n_evals = query(ingested, "SELECT count(*) FROM evals WHERE run_id = ?", [rid])[0][0]
    assert n_evals == _expected(log)["n_evals"] == 11
    shown = json.loads(cli("show", rid, "--store", ingested, "--format", "json").stdout)
    assert shown["software"]["cuda"] == "11.0" and shown["software"]["nccl"] == "2.7.5"
    assert shown["cpu"] == "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"
    assert shown["interconnect"] == "1Gb Ethernet"
    assert shown["stop_value"] == 0.759 and shown["dataset"] == "imagenet"


def test_google_placeholders_are_unknown_not_values(ingested: Path) -> None:
    """Google's placeholders in its system description ("CPUName", "TODO") are unknown, not values."""
    run = json.loads(
        cli("show", "Google/gpu-v100-8-TF2.0/resnet/result_0", "--store", ingested, "-f", "json").stdout
    )
    assert run["cpu"] is None  # "CPUName" in the system description is a placeholder
    assert run["interconnect"] is None  # "TODO"
    assert run["n_accelerators"] == 8 and run["framework"] == "tf2.0"


def test_reingest_changes_nothing(mlperf: Path, ingested: Path) -> None:
    """Ingesting the same logs again finds the 20 files unchanged and leaves every table as it was."""
    before = counts(ingested)
    again = cli("ingest", mlperf, "--store", ingested)
    assert again.returncode == 0
    assert "20 unchanged" in again.stdout
    assert counts(ingested) == before


def test_aborted_and_broken_logs(mlperf: Path, tmp_path: Path) -> None:
    """A run_stop with status aborted lands as aborted; a cut :::MLLOG line is quarantined, not skipped."""
    src = mlperf / "DellEMC" / "results" / "C4140" / "resnet" / "result_0.txt"
    dest = tmp_path / "DellEMC" / "results" / "C4140" / "resnet"
    dest.mkdir(parents=True)
    (tmp_path / "DellEMC" / "systems").mkdir()
    (tmp_path / "DellEMC" / "systems" / "C4140.json").write_bytes(
        (mlperf / "DellEMC/systems/C4140.json").read_bytes()
    )
    text = src.read_text().replace('"status": "success"', '"status": "aborted"')
    lines = text.splitlines()
    cut_at = next(i for i, line in enumerate(lines) if '"eval_accuracy"' in line)
    lines[cut_at] = lines[cut_at][:60]
    (dest / "result_0.txt").write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.duckdb"
    result = cli("ingest", tmp_path / "DellEMC", "--store", store)
    assert result.returncode == 3, result.stderr
    run = json.loads(cli("runs", "--store", store, "-f", "json").stdout)[0]
    assert run["status"] == "aborted"
    assert run["time_to_train_s"] == pytest.approx(_expected(src)["ttt"], rel=0.005)
    q = json.loads(cli("quarantine", "--store", store, "-f", "json").stdout)
    assert [(x["line"], x["reason"].split(":")[0]) for x in q] == [
        (cut_at + 1, "MLLOG line is not valid JSON")
    ]
