"""The trackers people already log to, read with each tool's own library and checked against the tool's own reader:
TensorBoard event files (Lightning's default logger, a SummaryWriter per rank), MLflow's SQLite and file stores (the
Hugging Face Trainer's report_to=["mlflow"] with system metrics) and W&B offline runs (a run per rank in a group;
W&B has no reader of its offline files, so they are checked against what the script that wrote them logged).

The fixtures were written by the tools (tests/data/imported/README.md); the expected values come from TensorBoard's
``EventAccumulator`` and the fixtures' own scripts, never from the readers' helpers."""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.tracking import MlflowClient
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata

from tests.conftest import cli, hs
from tests.importing import DATA, ingest, lint, query, run_cli, runs


def _accumulated(path: Path) -> Any:
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def _steps(store: Path, rank: int = 0) -> list[tuple[Any, ...]]:
    return query(store, f"SELECT step, iterations, samples, t_total, time FROM steps WHERE rank = {rank} "
                        "ORDER BY step")  # fmt: skip


def _ranks(store: Path) -> list[int]:
    return [r[0] for r in query(store, "SELECT DISTINCT rank FROM steps ORDER BY rank")]


def test_lightning_default_logger_against_tensorboards_own_reader(tmp_path: Path) -> None:
    """Lightning's TensorBoardLogger on 2 CPU ranks with ThroughputMonitor: rank 0's steps, its clock, the final
    validation accuracy and the hyper-parameters are what EventAccumulator and hparams.yaml say; the world of 2 is
    ThroughputMonitor's and the run is judged one rank reported for all (HS215)."""
    folder = DATA / "lightning-tensorboard"
    (events,) = folder.glob("events.out.tfevents.*")
    acc = _accumulated(events)
    expected = json.loads((folder / "expected.json").read_text())
    store = tmp_path / "s.duckdb"
    out = ingest(store, folder)
    assert "read as TensorBoard event file" in out and "hparams.yaml" in out  # read beside it, named
    (run,) = runs(store)
    assert run["world_size"] == expected["world_size"] == 2 and _ranks(store) == [0]
    timed = acc.Scalars("train/time")
    steps = _steps(store)
    assert [s[0] for s in steps] == [t.step for t in timed]
    # the step events' times are ThroughputMonitor's train/time differences; their walls the scalars' wall times
    assert [round(s[3], 6) for s in steps] == [
        round(b.value - a, 6) for a, b in zip([0.0] + [t.value for t in timed], timed, strict=False)
    ]
    assert steps[-1][4] - steps[0][4] == pytest.approx(timed[-1].wall_time - timed[0].wall_time, abs=1e-5)
    samples = acc.Scalars("train/samples")
    assert sum(s[2] for s in steps) == samples[-1].value == expected["samples_per_rank"][0]
    assert sum(s[1] for s in steps) == acc.Scalars("train/batches")[-1].value
    final = acc.Scalars("val_acc")[-1].value
    assert run["final_accuracy"]["value"] == pytest.approx(final, rel=1e-12)
    assert final == pytest.approx(
        expected["final_val_acc"], rel=1e-6
    )  # float32 in the log, float64 in the script
    (hp,) = query(store, "SELECT attrs -> 'hyperparameters' FROM runs")
    assert json.loads(hp[0]) == yaml.safe_load((folder / "hparams.yaml").read_text())
    (hs215,) = lint(store, "HS215")
    assert hs215["outcome"] == "fail"


def test_a_summarywriter_per_rank_is_one_run_of_every_rank(tmp_path: Path) -> None:
    """A plain DDP loop with a SummaryWriter per rank (folders rank0, rank1) and add_hparams: one run of 2 ranks,
    each rank's logging intervals as step events (the first opened by the writer's first record, the steps after the
    last closed by the final validation at the last step: every step counted once), the final validation accuracy
    and the hyper-parameters as TensorBoard's own reader gives them; every rank is there (HS215 passes)."""
    folder = DATA / "tensorboard-ddp"
    store = tmp_path / "s.duckdb"
    out = ingest(store, folder)
    assert "add_hparams' file" in out
    (run,) = runs(store)
    assert run["world_size"] == 2 and _ranks(store) == [0, 1]
    for rank in (0, 1):
        (events,) = (folder / f"rank{rank}").glob("events.out.tfevents.*")
        acc = _accumulated(events)
        counted = json.loads((folder / f"rank{rank}" / "counted.json").read_text())
        loss = acc.Scalars("train/loss")
        assert [t.step for t in loss] == counted["logged_steps"]
        steps = _steps(store, rank)
        last = acc.Scalars("val/accuracy")[-1]
        assert last.step == counted["steps"] > loss[-1].step
        assert [s[0] for s in steps] == [t.step for t in loss] + [last.step]
        assert sum(s[1] for s in steps) == counted["steps"] == 86
        assert steps[0][3] == pytest.approx(loss[0].wall_time - acc.FirstEventTimestamp(), abs=1e-5)
        assert sum(s[3] for s in steps) == pytest.approx(last.wall_time - acc.FirstEventTimestamp(), abs=1e-5)
    final = acc.Scalars("val/accuracy")[-1].value
    assert run["final_accuracy"]["value"] == pytest.approx(final, rel=1e-12)
    (below,) = (folder / "rank0").glob("*/events.out.tfevents.*")
    content = _accumulated(below).PluginTagToContent("hparams")["_hparams_/session_start_info"]
    said = hparams_metadata.parse_session_start_info_plugin_data(content).hparams
    (hp,) = query(store, "SELECT attrs -> 'hyperparameters' FROM runs")
    assert json.loads(hp[0]) == {k: v.number_value for k, v in said.items()}
    assert lint(store, "HS215") == []  # no finding: every rank's steps are in the store


def test_add_scalars_sub_folders_are_one_training_with_the_writers_own_file(tmp_path: Path) -> None:
    """SummaryWriter.add_scalars("loss", {"train", "val"}) writes loss_train/ and loss_val/ beside the writer's file
    (TensorBoard shows three runs): one run, never three repetitions; its training loss times all 120 steps and its
    held-out loss is the validation loss, value for value as EventAccumulator reads each folder and as the script
    logged them; whichever file is named, the run is the same."""
    folder = DATA / "tensorboard-add-scalars"
    logged = json.loads((folder / "logged.json").read_text())
    train, val = (_accumulated(folder / "run" / f"loss_{k}").Scalars("loss") for k in ("train", "val"))
    assert [(s.step, s.value) for s in val] == [
        (e["step"], pytest.approx(e["val"], rel=1e-6)) for e in logged
    ]
    store = tmp_path / "s.duckdb"
    out = ingest(store, folder / "run")
    assert "add_scalars' sub-folders read with this run" in out
    (run,) = runs(store)
    steps = _steps(store)
    # 120 steps, every one counted once: the first interval opened by the writer's own first record
    assert [s[0] for s in steps] == [t.step for t in train] and sum(s[1] for s in steps) == 120
    opened = _accumulated(folder / "run").FirstEventTimestamp()
    assert [s[3] for s in steps] == pytest.approx(
        [b - a for a, b in itertools.pairwise([opened, *(t.wall_time for t in train)])]
    )
    evals = query(store, "SELECT split, metric, value FROM evals ORDER BY time, seq")
    assert {(e[0], e[1]) for e in evals} == {("validation", "loss")}
    assert [e[2] for e in evals] == pytest.approx([s.value for s in val], rel=1e-12)
    assert run["final_quality"] == {"loss": pytest.approx(val[-1].value, rel=1e-12)}
    (child,) = (folder / "run" / "loss_val").glob("events.out.tfevents.*")
    again = tmp_path / "again.duckdb"
    assert "read with" in ingest(again, child)  # named alone, it is read with the writer's file
    assert [r["run_id"] for r in runs(again)] == [run["run_id"]]


def test_a_file_cut_short_lands_what_it_holds_and_says_what_it_lost(tmp_path: Path) -> None:
    """A copy cut in the middle of a record (a writer still writing, a copy cut off): the records before it land,
    the bytes after the last whole record are said with the file; a second ingest of the grown file reads it whole."""
    (events,) = (DATA / "lightning-tensorboard").glob("events.out.tfevents.*")
    whole = events.read_bytes()
    cut = tmp_path / "logs" / events.name
    cut.parent.mkdir()
    cut.write_bytes(whole[: len(whole) // 2])
    store = tmp_path / "s.duckdb"
    code, out = run_cli("ingest", str(cut), "--store", str(store))
    assert code == 0 and "is a record cut short" in out and f"of {len(whole) // 2:,}" in out
    half = len(_steps(store))
    cut.write_bytes(whole)
    ingest(store, cut)
    assert half < len(_steps(store)) == len(_accumulated(events).Scalars("train/time"))


def test_without_the_tensorboard_package_the_file_is_refused_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader reads with tensorboard's own code: where it is not installed, nothing lands (a later ingest with
    it reads the file) and the message says how to install it."""
    import sys

    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    store = tmp_path / "s.duckdb"
    folder = tmp_path / "logs"
    shutil.copytree(DATA / "lightning-tensorboard", folder)
    code, out = run_cli("ingest", str(folder), "--store", str(store))
    assert code != 0 and "pip install 'honestscale[tensorboard]'" in out
    monkeypatch.undo()
    ingest(store, folder)
    assert len(runs(store)) == 1


def _mlflow_copy(tmp_path: Path) -> Path:
    """The fixture's store (and the journal its writer left) in a folder of the test's own."""
    folder = tmp_path / "tracking"
    shutil.copytree(DATA / "mlflow-hf", folder, ignore=shutil.ignore_patterns("recorded"))
    return folder / "mlflow.db"


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def test_an_mlflow_store_against_mlflows_own_client(tmp_path: Path) -> None:
    """The Trainer's MLflow run (logging_steps=1, evaluation each epoch, system metrics every second): its logging
    points as step events, its clock, its final evaluation, its parameters and its end are what MlflowClient reads;
    the run the Trainer opened for the test evaluation and never ended (the process left with os._exit) is named,
    not landed; the store is never written by the read; one rank's log of a run of unknown size cannot be verified
    (HS215)."""
    db = _mlflow_copy(tmp_path)
    before = _digest(db, db.with_name("mlflow.db-journal"))
    reference = tmp_path / "reference"
    shutil.copytree(db.parent, reference)
    client = MlflowClient(tracking_uri=f"sqlite:///{reference / 'mlflow.db'}")
    (finished,) = [r for r in client.search_runs(["1"]) if r.info.status == "FINISHED"]
    (running,) = [r for r in client.search_runs(["1"]) if r.info.status == "RUNNING"]
    loss = client.get_metric_history(finished.info.run_id, "loss")
    evals = client.get_metric_history(finished.info.run_id, "eval_loss")
    store = tmp_path / "s.duckdb"
    out = ingest(store, db)
    assert running.info.run_id in out and "hold no training metric and no evaluation" in out
    assert _digest(db, db.with_name("mlflow.db-journal")) == before
    _as_mlflows_client(store, finished, loss, evals)


def _as_mlflows_client(store: Path, finished: Any, loss: list[Any], evals: list[Any]) -> None:
    """The Trainer's finished MLflow run as landed equals what MlflowClient reads: its logging points as step events,
    its clock, its final evaluation, its end and its parameters (MLflow's str(value), read back); one rank's log of a
    run of unknown size cannot be verified (HS215)."""
    (run,) = runs(store)
    assert run["run_id"] == f"mlflow:{finished.info.run_id}" and run["campaign"] == "hf-gpt2"
    assert run["status"] == "success" and run["world_size"] is None
    steps = _steps(store)
    # every logging point a step, the first opened by the run's start (and warm-up: the start-up is in it); the
    # Trainer's global_step counts the optimizer steps done, so they add up to the last point's
    assert [s[0] for s in steps] == sorted({m.step for m in loss})
    assert sum(s[1] for s in steps) == loss[-1].step
    assert sum(s[3] for s in steps) == pytest.approx(
        (loss[-1].timestamp - finished.info.start_time) / 1000, abs=1e-6
    )
    assert run["final_quality"] == {"loss": evals[-1].value}
    (stopped,) = query(store, "SELECT time FROM events WHERE kind = 'run_stop'")
    assert stopped[0] == finished.info.end_time / 1000
    (hp,) = query(store, "SELECT attrs -> 'hyperparameters' FROM runs")
    landed = json.loads(hp[0])
    assert landed.keys() == finished.data.params.keys()
    assert {k: str(v) for k, v in landed.items()} == finished.data.params
    (hs215,) = lint(store, "HS215")
    assert hs215["outcome"] == "cannot_verify"


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def test_an_mlflow_file_store_against_mlflows_own_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same Trainer logging to MLflow's file store (mlruns/, MLFLOW_ALLOW_FILE_STORE=true): ingested by its
    folder, as a user names it, each run read with its folder (the metric, parameter and tag files, the experiment's
    meta.yaml: read with it, never lost); the logging points, the clock, the final evaluation, the parameters and the
    end equal what MlflowClient reads from the store; the run with parameters only is said, not an error; the store
    is not written (not a file, not a folder: MLflow's client would add .trash)."""
    mlruns = tmp_path / "mlruns"
    shutil.copytree(DATA / "mlflow-hf-files" / "mlruns", mlruns)
    for run_folder in (
        m.parent for m in mlruns.glob("*/*/meta.yaml")
    ):  # the empty folders git does not keep,
        for part in ("artifacts", "metrics", "params", "tags"):  # without which MLflow's client finds no run
            (run_folder / part).mkdir(exist_ok=True)
    before = _tree(mlruns)
    folders_before = sorted(p for p in mlruns.rglob("*") if p.is_dir())
    reference = tmp_path / "reference"
    shutil.copytree(mlruns, reference)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=f"file://{reference}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "hf-gpt2"]
    found = client.search_runs([experiment.experiment_id])
    (finished,) = [r for r in found if r.info.status == "FINISHED"]
    (running,) = [r for r in found if r.info.status == "RUNNING"]
    loss = client.get_metric_history(finished.info.run_id, "loss")
    evals = client.get_metric_history(finished.info.run_id, "eval_loss")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")  # the reader opens the file store itself
    store = tmp_path / "s.duckdb"
    code, out = run_cli("ingest", f"file://{mlruns}", "--store", str(store))
    assert code == 0, out
    assert running.info.run_id in out and "hold no training metric and no evaluation" in out
    assert "not landed" not in out and "MLflow run files" in out
    assert _tree(mlruns) == before and sorted(p for p in mlruns.rglob("*") if p.is_dir()) == folders_before
    _as_mlflows_client(store, finished, loss, evals)
    # read again: unchanged; a run's meta.yaml rewritten (MLflow rewrites it as the run ends) is read again whole,
    # the run's events replaced (never doubled), never refused as a log rewritten under the store
    assert "(2 unchanged)" in ingest(store, mlruns)
    meta = mlruns / experiment.experiment_id / finished.info.run_id / "meta.yaml"
    meta.write_text(meta.read_text().replace("status: 3", "status: 3\n"))
    assert "1 runs touched" in ingest(store, mlruns)
    assert [s[0] for s in _steps(store)] == sorted({m.step for m in loss})
    # the verdicts written back as the run's tag files, which MLflow's client reads; nothing else changes
    written = _tree(mlruns)
    code, out = run_cli("lint", "--store", str(store), "--annotate", "mlflow", "--write")
    assert code in (0, 1) and "wrote 4 tags" in out, out
    changed = {k for k, v in _tree(mlruns).items() if written.get(k) != v}
    assert changed == {f"{experiment.experiment_id}/{finished.info.run_id}/tags/honestscale.{t}"
                       for t in ("verdict", "failed", "cannot_verify", "quote")}  # fmt: skip
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    tags = MlflowClient(tracking_uri=f"file://{mlruns}").get_run(finished.info.run_id).data.tags
    assert tags["honestscale.verdict"] in ("fail", "cannot verify", "pass")


def test_two_trainings_with_one_seed_in_two_mlflow_stores_are_two_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Trainer's run in an SQLite store and another in a file store: one recipe, one seed, so every evaluation
    is equal (MLflow's own client reads both), but the second trained hours after the first ended: two
    repetitions, neither superseded (equal values are no proof of one training; seeded repetitions log them too)."""
    db = _mlflow_copy(tmp_path)
    mlruns = tmp_path / "mlruns"
    shutil.copytree(DATA / "mlflow-hf-files" / "mlruns", mlruns)
    reference = tmp_path / "reference"
    shutil.copytree(mlruns, reference)
    for meta in reference.glob("*/*/meta.yaml"):  # the empty folders git does not keep
        for part in ("artifacts", "metrics", "params", "tags"):
            (meta.parent / part).mkdir(exist_ok=True)
    sql = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'sql-reference.db'}")
    shutil.copyfile(db, tmp_path / "sql-reference.db")
    (a,) = [r for r in sql.search_runs(["1"]) if r.info.status == "FINISHED"]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    files = MlflowClient(tracking_uri=f"file://{reference}")
    (experiment,) = [e for e in files.search_experiments() if e.name == "hf-gpt2"]
    (b,) = [r for r in files.search_runs([experiment.experiment_id]) if r.info.status == "FINISHED"]
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    a_evals = sql.get_metric_history(a.info.run_id, "eval_loss")
    b_evals = files.get_metric_history(b.info.run_id, "eval_loss")
    assert len(a_evals) >= 2 and [m.value for m in a_evals] == [m.value for m in b_evals]
    assert a.info.end_time < min(
        m.timestamp for m in b_evals
    )  # the second evaluated after the first had ended
    store = tmp_path / "s.duckdb"
    said = hs("ingest", db, mlruns, "--store", store)  # a fresh process: MLflow imported by the ingest itself
    assert said.returncode == 0, said.stderr
    assert "INFO" not in said.stdout + said.stderr, (
        said.stderr
    )  # MLflow's and Alembic's log lines are not ours
    landed = [r for r in runs(store) if r["source"] in ("mlflow-sqlite", "mlflow-files")]
    assert len(landed) == 2 and not any(r["superseded"] for r in landed), landed


def test_one_training_in_mlflow_and_recorded_by_the_callback_is_one_run(tmp_path: Path) -> None:
    """The same Trainer run logged to MLflow and recorded by honestscale's callback on both ranks: the MLflow run is
    the recorded one's twin (every evaluation equal), counted once, never two repetitions."""
    db = _mlflow_copy(tmp_path)
    store = tmp_path / "s.duckdb"
    ingest(store, db, DATA / "mlflow-hf" / "recorded")
    landed = {r["run_id"]: r for r in runs(store)}
    (mlflow_run,) = [r for r in landed if r.startswith("mlflow:")]
    (recorded,) = [r for r in landed if not r.startswith("mlflow:")]
    assert landed[mlflow_run]["superseded"] and recorded in landed[mlflow_run]["superseded"]
    assert not landed[recorded]["superseded"]


def test_the_verdicts_written_back_into_the_mlflow_store_once_and_nothing_else(tmp_path: Path) -> None:
    """lint --annotate mlflow shows the tags and writes nothing; --write sets them on the run (MLflow's own client
    reads them back, equal to the lint's verdicts about that run); a second call changes nothing; no metric, parameter
    or other tag changes; the changed store is read again whole by the next ingest."""
    db = _mlflow_copy(tmp_path)
    store = tmp_path / "s.duckdb"
    ingest(store, db)
    (run,) = runs(store)
    rid = run["run_id"].removeprefix("mlflow:")
    before = _digest(db)
    got = cli("lint", "--store", str(store), "--annotate", "mlflow", "-f", "json")
    verdicts = [f for f in json.loads(got.stdout) if run["run_id"] in f["runs"]]
    assert "dry run: 4 tags on 1 mlflow runs" in got.stderr and _digest(db) == before
    reference = MlflowClient(tracking_uri=f"sqlite:///{db}")
    was = reference.get_run(rid).data
    history = {k: [(m.step, m.value) for m in reference.get_metric_history(rid, k)] for k in was.metrics}
    code, out = run_cli("lint", "--store", str(store), "--annotate", "mlflow", "--write")
    assert code in (0, 1), out
    assert "wrote 4 tags" in out
    now = reference.get_run(rid).data
    failed = sorted({f["code"] for f in verdicts if f["outcome"] == "fail"})
    assert now.tags["honestscale.verdict"] == ("fail" if failed else "pass")
    assert now.tags["honestscale.failed"] == (", ".join(failed) or "none")
    assert {k: v for k, v in now.tags.items() if not k.startswith("honestscale.")} == was.tags
    assert now.params == was.params and now.metrics == was.metrics
    assert {
        k: [(m.step, m.value) for m in reference.get_metric_history(rid, k)] for k in was.metrics
    } == history
    written = _digest(db)
    code, out = run_cli("lint", "--store", str(store), "--annotate", "mlflow", "--write")
    assert code in (0, 1), out
    assert "wrote 0 tags" in out and "its tags already say it" in out and _digest(db) == written
    assert "read again whole" in ingest(store, db)


def test_wandb_offline_runs_of_a_group_are_one_run_of_every_rank(tmp_path: Path) -> None:
    """A run per rank in one W&B group, each named rank<N>: one run of 2 ranks; each rank's logging points on
    trainer/global_step (never W&B's _step) as step events timed by the log calls' _timestamp; the last validation
    accuracy, the config and the exit are what the script logged (logged-rank<R>.json, its own record)."""
    folder = DATA / "wandb-ddp"
    store = tmp_path / "s.duckdb"
    ingest(store, folder)
    (run,) = runs(store)
    assert run["world_size"] == 2 and _ranks(store) == [0, 1] and run["status"] == "success"
    for rank in (0, 1):
        logged = json.loads((folder / f"logged-rank{rank}.json").read_text())
        training = [e for e in logged["logged"] if "train/loss" in e]
        steps = _steps(store, rank)
        # every logging point a step event, the first opened by the run's start, the steps after the last closed
        # by the final evaluation (at the training's last step): every optimizer step counted once
        assert [s[0] for s in steps] == [e["trainer/global_step"] for e in training] + [logged["steps"]]
        assert sum(s[1] for s in steps) == logged["steps"] == 86
        (started,) = query(store, "SELECT started_at FROM runs")[0]
        last = [e for e in logged["logged"] if e["trainer/global_step"] == logged["steps"]][-1]
        # W&B stamps each log call inside it; the script read its clock when log() returned (up to 30 ms later
        # for the last call, which W&B's service answered slowest)
        assert 0 <= last["time"] - started - sum(s[3] for s in steps) < 0.05
    final = [e for e in logged["logged"] if "val/accuracy" in e][-1]["val/accuracy"]
    assert run["final_accuracy"]["value"] == final and run["final_accuracy"]["split"] == "validation"
    (hp,) = query(store, "SELECT attrs -> 'hyperparameters' FROM runs")
    assert json.loads(hp[0]) == logged["config"]
    assert lint(store, "HS215") == []


def test_wandb_verdicts_are_a_dry_run_with_the_code_that_applies_them(tmp_path: Path) -> None:
    """An offline W&B run cannot be written: --annotate wandb prints the keys for the group's runs and the code a
    user with a W&B server runs after wandb sync; --write is refused, naming why; a subset of the rules is refused
    too (a run judged by some rules would read as passing)."""
    store = tmp_path / "s.duckdb"
    ingest(store, DATA / "wandb-ddp")
    got = cli("lint", "--store", str(store), "--annotate", "wandb")
    assert "filters={\"group\": 'digits-ddp'}" in got.stderr and "honestscale.verdict" in got.stderr
    assert "dry run: 1 W&B trainings" in got.stderr
    code, out = run_cli("lint", "--store", str(store), "--annotate", "wandb", "--write")
    assert code == 2 and "cannot be written" in out
    code, out = run_cli("lint", "--store", str(store), "--annotate", "wandb", "--select", "HS215")
    assert code == 2 and "every rule" in out


def test_the_trainers_tensorboard_folder_is_one_run_and_the_callbacks_twin(tmp_path: Path) -> None:
    """The Trainer's report_to=["tensorboard"] writes two files into one folder (its final evaluation opens the
    writer again): one run, as TensorBoard itself reads a folder (EventAccumulator on the folder gives its losses and
    the test loss); recorded by honestscale's callback too, it is that run's twin (a 32-bit value equal to the
    recorded one rounded), counted once; the Trainer's runtimes are never a quality."""
    folder = DATA / "hf-tensorboard"
    (logs,) = (folder / "runs").iterdir()
    acc = _accumulated(logs)
    store = tmp_path / "s.duckdb"
    out = ingest(store, folder)
    assert "2 event files of one folder read as one run" in out
    landed = {r["run_id"]: r for r in runs(store)}
    (tb,) = [r for r in landed.values() if r["source"] == "tensorboard"]
    (recorded,) = [r for r in landed.values() if r["source"] == "native"]
    assert tb["superseded"] and recorded["run_id"] in tb["superseded"] and not recorded["superseded"]
    assert tb["final_quality"] == {"loss": pytest.approx(acc.Scalars("test/loss")[-1].value, rel=1e-12)}
    loss = acc.Scalars("train/loss")
    steps = query(store, f"SELECT step FROM steps WHERE run_id = '{tb['run_id']}' ORDER BY step")
    assert [s[0] for s in steps] == [t.step for t in loss]  # the first opened by the writer's start
    metrics = query(store, f"SELECT DISTINCT metric FROM evals WHERE run_id = '{tb['run_id']}'")
    assert {m[0] for m in metrics} == {"loss"}  # eval/runtime, test/runtime, */samples_per_second: no quality


def test_a_tensorboard_file_written_after_its_folder_landed_reads_the_folder_again(tmp_path: Path) -> None:
    """The Trainer's second event file (its final evaluation, written after training) lands in a folder whose first
    file an earlier ingest read: the first file is read again with it (the test loss is the run's, as TensorBoard's
    reader of the whole folder says), never left as a file 'read with' an unchanged one; a third ingest reads
    nothing."""
    (logs,) = (DATA / "hf-tensorboard" / "runs").iterdir()
    first, later = sorted(logs.glob("events.out.tfevents.*"))
    folder = tmp_path / "runs" / logs.name
    folder.mkdir(parents=True)
    shutil.copyfile(first, folder / first.name)
    store = tmp_path / "s.duckdb"
    ingest(store, folder)
    (run,) = runs(store)
    assert "test" not in {e[0] for e in query(store, "SELECT split FROM evals")}
    shutil.copyfile(later, folder / later.name)
    out = ingest(store, folder)
    assert f"read again whole: {later.name} beside it" in out
    (run,) = runs(store)
    test_loss = _accumulated(logs).Scalars("test/loss")[-1].value
    assert run["final_quality"] == {"loss": pytest.approx(test_loss, rel=1e-12)}
    assert query(store, "SELECT count(*) FROM evals WHERE split = 'test'") == [(1,)]
    assert "0 events landed" in ingest(store, folder)


def test_one_training_logged_by_two_loggers_is_counted_once(tmp_path: Path) -> None:
    """Lightning's TensorBoardLogger and CSVLogger side by side on one training: two logs, one run counted (the
    TensorBoard log's: a wall time on every value), the CSV's kept and listed as superseded, never a second
    repetition; its evaluations are the ones the script saw handed to the loggers."""
    both = DATA / "lightning-two-loggers"
    expected = json.loads((both / "expected.json").read_text())
    store = tmp_path / "s.duckdb"
    out = ingest(store, both / "csv", both / "tensorboard")
    landed = {r["run_id"]: r for r in runs(store)}
    (tb,) = [r for r in landed if r.startswith("tensorboard:")]
    (csv,) = [r for r in landed if r.startswith("lightning:")]
    assert landed[csv]["superseded"] and tb in landed[csv]["superseded"] and "(tensorboard)" in out
    assert not landed[tb]["superseded"]
    values = query(
        store, f"SELECT value FROM evals WHERE run_id = '{tb}' AND metric = 'accuracy' ORDER BY time, seq"
    )
    assert [v[0] for v in values] == pytest.approx(expected["val_acc_logged"], rel=1e-7)
    # counted once: the campaign's repetitions hold one run of this training, whichever order the logs land in
    again = tmp_path / "again.duckdb"
    ingest(again, both / "tensorboard", both / "csv")
    assert [r["run_id"] for r in runs(again) if not r["superseded"]] == [tb]


def test_lightnings_train_loss_times_the_steps_and_its_per_batch_validation_is_no_evaluation(
    tmp_path: Path,
) -> None:
    """The LightningModule idiom ``self.log("train_loss", loss)`` (no ThroughputMonitor) gives TensorBoard's log a step
    event per logging interval, as EventAccumulator says (the Trainer's end-of-training summary, also named train_*,
    is told by its train_runtime beside it; the CSV has no clock to time them); in both logs, validation logged with on_step and on_epoch
    lands its epoch values (``val_acc_epoch``) as the evaluations at the training step, and its per-batch values
    (``val_acc_step``, at Lightning's count of validation batches) as none, said."""
    folder = DATA / "lightning-val-on-step"
    expected = json.loads((folder / "expected.json").read_text())
    (events,) = (folder / "tensorboard-logger").glob("events.out.tfevents.*")
    acc = _accumulated(events)
    logged = [s.step for s in acc.Scalars("train_loss")]
    assert logged == expected["train_loss_steps"]
    with (folder / "csv-logger" / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows if r["train_loss"]] == logged
    epochs = [
        (v["step"], v["val_acc_epoch"], v["val_loss_epoch"], v["epoch"]) for v in expected["validations"]
    ]
    assert [s.step for s in acc.Scalars("val_acc_epoch")] == [e[0] for e in epochs]
    assert [s.value for s in acc.Scalars("val_acc_epoch")] == pytest.approx([e[1] for e in epochs], rel=1e-6)
    per_batch = acc.Scalars("val_acc_step")
    assert len(per_batch) > len(epochs) and max(s.step for s in per_batch) < min(e[0] for e in epochs)
    for log in ("tensorboard", "csv"):
        store = tmp_path / f"{log}.duckdb"
        out = ingest(store, folder / f"{log}-logger")
        assert "val_acc_step: Lightning's value of one evaluation batch" in out and "is no evaluation" in out
        (run,) = runs(store)
        steps = _steps(store)
        if log == "tensorboard":  # one step per logging interval, timed by the scalars' wall times
            # the first interval opened by the writer's file_version record (EventAccumulator's first event):
            # Lightning's point at step s follows s + 1 batches, so every optimizer step is counted once
            assert [s[0] for s in steps] == logged
            assert [s[1] for s in steps] == [logged[0] + 1] + [b - a for a, b in itertools.pairwise(logged)]
            assert sum(s[1] for s in steps) == expected["global_step"]
            walls = [acc.FirstEventTimestamp()] + [s.wall_time for s in acc.Scalars("train_loss")]
            assert [s[3] for s in steps] == pytest.approx([b - a for a, b in itertools.pairwise(walls)])
        else:  # CSVLogger writes no time: without ThroughputMonitor no step can be timed
            assert steps == [] and "train_loss" in out
        evals = query(store, "SELECT epoch, metric, value FROM evals ORDER BY time, seq, metric")
        for metric, i in (("accuracy", 1), ("loss", 2)):
            assert [s for s, m, _ in evals if m == metric] == [e[3] for e in epochs]
            assert [v for _, m, v in evals if m == metric] == pytest.approx([e[i] for e in epochs], rel=1e-6)
        assert {m for _, m, _ in evals} == {"accuracy", "loss"}  # no "accuracy_step", no "loss_epoch"
        assert run["final_accuracy"]["value"] == pytest.approx(epochs[-1][1], rel=1e-6)


def test_a_wandb_run_copied_twice_is_no_resumed_run(tmp_path: Path) -> None:
    """Two run folders with one run id and one start are one launch copied twice (a resumed run's launches start one
    after the other): never read as launches, so never its history counted twice; the copy's events are the
    original's, skipped as duplicates."""
    from tests.conformance.invariants import FIXTURES

    (original,) = (FIXTURES / "wandb" / "loop" / "wandb").glob("offline-run-*")
    copy = tmp_path / "wandb" / (original.name.replace("offline-run-", "offline-run-copy-"))
    shutil.copytree(original, tmp_path / "wandb" / original.name)
    alone = tmp_path / "alone.duckdb"
    ingest(alone, tmp_path / "wandb")
    (events,) = query(alone, "SELECT count(*) FROM events")[0]
    shutil.copytree(original, copy)
    store = tmp_path / "s.duckdb"
    code, out = run_cli("ingest", str(tmp_path / "wandb"), "--store", str(store))
    assert code == 0 and f"{events} duplicate events skipped" in out, out
    assert len(runs(store)) == 1
    logged = json.loads((FIXTURES / "wandb" / "loop" / "logged-rank0.json").read_text())
    assert sum(s[1] for s in _steps(store)) == logged["steps"]  # counted once


def test_a_wandb_file_holding_its_header_alone_lands_nothing_and_says_why(tmp_path: Path) -> None:
    """A rank that torchrun stopped with SIGTERM (another rank failed) before W&B wrote a record leaves a run file of
    W&B's header alone (7 bytes, seen in the matrix's wandb/ddp-group-rank-fails): nothing in it to land, said,
    not a file whose results were lost (exit 0); the group's other rank lands as the failed training it was."""
    from tests.conformance.invariants import FIXTURES

    cell = FIXTURES / "wandb" / "ddp-group-rank-fails" / "wandb"
    shutil.copytree(cell, tmp_path / "wandb")
    (rank0,) = (tmp_path / "wandb").glob("offline-run-*-rank0/run-*.wandb")
    rank0.write_bytes(rank0.read_bytes()[:7])  # the header W&B writes first, and nothing after it
    store = tmp_path / "s.duckdb"
    code, out = run_cli("ingest", str(tmp_path / "wandb"), "--store", str(store))
    assert code == 0, out
    assert f"{rank0}: W&B's header alone, no record" in out.replace("\n", " "), out
    (run,) = runs(store)
    assert run["status"] == "failed" and run["world_size"] == 2, run


def test_the_trainers_runs_folder_is_read_once_and_again_where_it_changed(tmp_path: Path) -> None:
    """The launches of a resumed Trainer are found from every folder of ``runs/`` (read once for all its files):
    each launch's file names both launches; a folder removed (``runs/``'s modification time changes) is seen at
    the next file read, never the launches as they were."""
    from honestscale.collector.importers.tensorboard import _resumed
    from tests.conformance.invariants import FIXTURES

    shutil.copytree(
        FIXTURES / "trainer" / "tensorboard-killed-resumed" / "out" / "trainer" / "runs", tmp_path / "runs"
    )
    folders = sorted(d for d in (tmp_path / "runs").iterdir())
    files = [next(d.glob("events.out.tfevents.*")) for d in folders]
    for file in files:
        assert [x.path.parent for x in _resumed.chain(file)] == folders
    shutil.rmtree(folders[0])
    assert _resumed.chain(files[1]) == []
