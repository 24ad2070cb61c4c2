"""The callbacks for Lightning, Hugging Face's Trainer and Keras, each on its real library: what they record agrees
with what the framework itself logged (metrics.csv, trainer_state.json, History), and the runs are judged."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from honestscale.cli import app
from honestscale.events import read_events
from tests.conftest import REPO, framework_python
from tests.tools import module

EXAMPLES = REPO / "examples" / "record"


def _runs(out: Path) -> dict[str, list[list[dict[str, Any]]]]:
    """run id -> each rank's events, rank order."""
    return {d.name: [[e for _, e in read_events(f) if isinstance(e, dict)] for f in sorted(d.glob("events-rank*.jsonl"))]
            for d in sorted(out.iterdir())}  # fmt: skip


def _kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def _judged(out: Path, campaign: str, store: Path) -> dict[str, Any]:
    """Ingest, lint and build the report of the campaign in process; the report's JSON and HS106's verdict row."""
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(out), "--store", str(store)]).exit_code == 0
    table = runner.invoke(app, ["lint", "--campaign", campaign, "--store", str(store), "--select", "HS106"],
                          env={"COLUMNS": "300"}).output  # fmt: skip
    report = runner.invoke(app, ["report", "--campaign", campaign, "--store", str(store), "--format", "json"])
    assert report.exit_code == 0, report.output
    (row,) = [
        cells
        for line in table.splitlines()
        if (cells := [c.strip() for c in line.split("│")])[1:2] == ["HS106"]
    ]
    return {"report": json.loads(report.output), "hs106": row[4]}


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module("sklearn")
    path = tmp_path_factory.mktemp("data") / "digits.npz"
    subprocess.run([sys.executable, EXAMPLES / "digits_npz.py", path], check=True, timeout=120)
    return path


def _run(cmd: list[Any], tmp_path: Path, **env: str) -> None:
    done = subprocess.run([str(c) for c in cmd], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HONESTSCALE_OUT": str(tmp_path / "events"), "OMP_NUM_THREADS": "1", **env},
                          stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def test_lightning_ddp_on_two_processes_agrees_with_its_metrics_csv(tmp_path: Path, digits: Path) -> None:
    module("lightning")
    _run([sys.executable, EXAMPLES / "lightning_digits.py", digits, tmp_path / "logs"], tmp_path)
    ((run_id, ranks),) = _runs(tmp_path / "events").items()
    with (tmp_path / "logs" / "digits" / "version_0" / "metrics.csv").open() as f:
        logged = list(csv.DictReader(f))
    steps_logged = sorted({int(r["step"]) for r in logged if r["train_loss_step"]})
    val_logged = [float(r["val_acc"]) for r in logged if r["val_acc"]]
    (test_logged,) = [float(r["test_acc"]) for r in logged if r["test_acc"]]
    assert len(ranks) == 2, "every rank writes its own file"
    for rank, events in enumerate(ranks):
        start, steps = events[0], _kinds(events, "step")
        assert start["rank"] == rank and start["world_size"] == 2 and start["parallel"] == {"dp": 2}
        assert start["hyperparameters"]["strategy"] == "DDPStrategy" and start["global_batch_size"] == 64
        assert len(steps) == len(steps_logged) == 44, "one step per optimizer step, as Lightning counts them"
        assert sum(s["samples"] for s in steps) == 2 * 700, (
            "DistributedSampler: half of 1,400 a rank, each epoch"
        )
        assert all({"t_data", "t_compute", "t_optimizer"} <= s.keys() and "t_comm" not in s for s in steps)
        assert events[-1]["kind"] == "run_stop" and events[-1]["status"] == "success"
    evals = _kinds(ranks[0], "eval")
    assert [(e["split"], e["metric"], e["epoch"]) for e in evals] == [
        ("validation", "accuracy", 0), ("validation", "accuracy", 1), ("test", "accuracy", 1)]  # fmt: skip
    assert [e["value"] for e in evals] == pytest.approx([*val_logged, test_logged], abs=1e-7)
    assert not _kinds(ranks[1], "eval"), "rank 0 records the metrics Lightning synchronised"
    judged = _judged(tmp_path / "events", "lightning-digits", tmp_path / "s.duckdb")
    assert judged["hs106"] == "fail", "in-memory inputs: I/O is not measured"
    assert [r["run_id"] for r in judged["report"]["runs"]] == [run_id]


def test_hugging_face_trainer_under_torchrun_agrees_with_its_trainer_state(tmp_path: Path) -> None:
    module("transformers")
    torchrun = Path(sys.executable).with_name("torchrun")
    _run(
        [torchrun, "--standalone", "--nproc-per-node", "2", EXAMPLES / "hf_gpt2.py", tmp_path / "out"],
        tmp_path,
    )
    ((run_id, ranks),) = _runs(tmp_path / "events").items()
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    val_logged = [h["eval_loss"] for h in state["log_history"] if "eval_loss" in h]
    assert len(ranks) == 2
    for rank, events in enumerate(ranks):
        start, steps = events[0], _kinds(events, "step")
        assert start["rank"] == rank and start["world_size"] == 2 and start["launcher"] == "torchrun"
        assert start["software"]["transformers"] and start["global_batch_size"] == 16
        assert len(steps) == state["global_step"] == 32
        assert sum(s["samples"] for s in steps) == 2 * 128 and all(
            s["tokens"] == 64 * s["samples"] for s in steps
        )
        assert all({"t_data", "t_compute", "t_optimizer"} <= s.keys() for s in steps)
        assert events[-1]["status"] == "success"
    evals = _kinds(ranks[0], "eval")
    assert [(e["split"], e["metric"], e["epoch"]) for e in evals] == [
        ("validation", "loss", 0), ("validation", "loss", 1), ("test", "loss", 1)]  # fmt: skip
    assert [e["value"] for e in evals[:2]] == pytest.approx(val_logged, abs=1e-9)
    judged = _judged(tmp_path / "events", "hf-gpt2", tmp_path / "s.duckdb")
    assert [(r["run_id"], r["split"], r["metric"]) for r in judged["report"]["runs"]] == [
        (run_id, "test", "loss")
    ]


def test_keras_fit_agrees_with_its_history_in_keras_3_and_tf_keras(tmp_path: Path, digits: Path) -> None:
    python = framework_python("tensorflow")
    for flavour in ("", "--legacy"):
        _run([python, EXAMPLES / "keras_digits.py", digits, tmp_path / f"history{flavour}.json", *[flavour][:len(flavour) > 0]],
             tmp_path, TF_CPP_MIN_LOG_LEVEL="2")  # fmt: skip
    runs = _runs(tmp_path / "events")
    assert len(runs) == 2
    for flavour in ("", "--legacy"):
        logged = json.loads((tmp_path / f"history{flavour}.json").read_text())
        ((events,),) = [r for r in runs.values() if ("tf-keras" in r[0][0]["software"]) == bool(flavour)]
        assert events[0]["software"]["tf-keras" if flavour else "keras"] == logged["keras"]
        steps = _kinds(events, "step")
        assert len(steps) == 2 * math.ceil(1400 / 64) and sum(s["samples"] for s in steps) == 2 * 1400
        assert steps[21]["samples"] == 1400 - 21 * 64, "the epoch's short last batch, from train_size"
        assert all(not {"t_data", "t_compute", "t_comm", "t_optimizer"} & s.keys() for s in steps), (
            "unseen: unknown"
        )
        epochs = _kinds(events, "epoch")
        assert [e["train_loss"] for e in epochs] == pytest.approx(logged["history"]["loss"], abs=1e-7)
        val = {
            (e["metric"], e["epoch"]): e["value"]
            for e in _kinds(events, "eval")
            if e["split"] == "validation"
        }
        assert [val[("accuracy", i)] for i in range(2)] == pytest.approx(
            logged["history"]["val_accuracy"], abs=1e-7
        )
        test = {e["metric"]: e["value"] for e in _kinds(events, "eval") if e["split"] == "test"}
        assert test == pytest.approx(logged["test"], abs=1e-7)
    judged = _judged(tmp_path / "events", "keras-digits", tmp_path / "s.duckdb")
    assert judged["hs106"] == "fail"  # in memory: staged data fails first, whatever the steps say
    assert len(judged["report"]["runs"]) == 2
