"""MLPerf Training logs of every round (v0.7 to v4.0) against the official reader, mlperf-logging.

Every result file under ``../shared/data/mlperf-training-v1x/`` and ``../shared/data/mlperf-training-v0.7/``
must be one run whose time, status, global batch, accelerator count and final quality equal what
mlperf-logging's parser (``compliance_checker.mlp_parser``) and result summarizer compute from the same
file; every submission's score must equal the summarizer's olympic average.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from honestscale import catalogue
from honestscale import view as _view
from honestscale.analysis.mlperf import submissions
from tests.conftest import (
    REPO,
    assert_run_as_reference,
    cli,
    query,
    reference_olympic_minutes,
    runs_by_file,
    submission_id,
)

mlp_parser = pytest.importorskip("mlperf_logging.compliance_checker.mlp_parser")
summarizer = pytest.importorskip("mlperf_logging.result_summarizer.result_summarizer")

DATA = REPO.parent / "shared" / "data"
ROOTS = (DATA / "mlperf-training-v1x", DATA / "mlperf-training-v0.7")


@pytest.fixture(scope="module")
def roots() -> tuple[Path, ...]:
    if not all(r.is_dir() for r in ROOTS):
        pytest.fail(f"MLPerf logs missing at {ROOTS}: ../shared/data must be beside the repo")
    return ROOTS


def result_files(roots: tuple[Path, ...]) -> list[Path]:
    return sorted(p for r in roots for p in r.glob("**/results/*/*/result_*.txt") if "power" not in p.parts)


def _ruleset(path: Path) -> str:
    parts = path.parts
    rnd = catalogue.round_of(parts[parts.index("results") - 2])
    assert rnd is not None
    return f"{rnd}.0"


def reference(path: Path) -> dict[str, Any]:
    """What mlperf-logging reads from one result file."""
    lines, failed = mlp_parser.parse_file(str(path), _ruleset(path))
    assert not failed, failed[:2]
    try:
        start, stop = summarizer._query_run_start_stop(lines)
        seconds: float | None = (stop - start) / 1000.0
    except ValueError:  # run_stop not recorded
        seconds = None
    stops = [ll for ll in lines if ll.key == "run_stop"]
    status = stops[0].value["metadata"].get("status") if stops else None
    gbs = next(ll.value["value"] for ll in lines if ll.key == "global_batch_size")
    evals = [ll.value["value"] for ll in lines if ll.key == "eval_accuracy"]
    org = path.parents[3]
    desc = summarizer._load_system_desc(str(org), path.parents[1].name)
    return {
        "seconds": seconds,
        "status": status,
        "gbs": gbs,
        # the summarizer's accelerators_count (v0.7 descriptions spell the key "number of nodes")
        "accelerators": int(desc["accelerators_per_node"])
        * int(desc.get("number_of_nodes", desc.get("number of nodes"))),
        "final": evals[-1] if evals else None,
    }


@pytest.fixture(scope="module")
def store(roots: tuple[Path, ...], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rounds") / "s.duckdb"
    result = cli("ingest", *roots, "--store", path)
    assert result.returncode == 0, result.stderr
    return path


def test_every_result_file_is_one_run_equal_to_the_reference(roots: tuple[Path, ...], store: Path) -> None:
    files = result_files(roots)
    assert len(files) >= 200
    runs = runs_by_file(store)
    assert set(runs) == {str(p) for p in files}
    seen_status: set[str] = set()
    for path in files:
        ref, run = reference(path), runs[str(path)]
        where = str(path.relative_to(DATA))
        assert_run_as_reference(run, ref, where)
        seen_status.add(run["status"])
        quality = json.loads(run["final_quality"]) if run["final_quality"] else {}
        final = ref["final"]
        if isinstance(final, dict):  # Mask R-CNN: one value per metric, named by the catalogue
            rules = catalogue.mlperf(
                run["model"], catalogue.round_of(path.parts[path.parts.index("results") - 2])
            )
            assert rules is not None, where
            names = {m.key: m.name for m in rules.metrics}
            assert quality == {names[k]: pytest.approx(v) for k, v in final.items()}, where
        elif final is not None:
            assert quality[run["target_metric"]] == pytest.approx(final), where
            assert run["final_value"] == pytest.approx(final), where
    assert seen_status == {"success", "aborted", "failed", "incomplete"}


def test_every_submission_score_is_the_reference_olympic_average(
    roots: tuple[Path, ...], store: Path
) -> None:
    with duckdb.connect(str(store), read_only=True) as con:
        ours = {s.folder: s for s in submissions(_view.build(con).runs)}
    folders = sorted({p.parent for p in result_files(roots)})
    assert len(ours) == len(folders)
    for folder in folders:
        sub = ours[submission_id(folder)]
        benchmark = summarizer._benchmark_alias(folder.name)
        # The summarizer's olympic average over the runs the reader sees converge (status success)...
        max_dropped = 4 if benchmark == "unet3d" else 1
        expected = reference_olympic_minutes(folder, reference, max_dropped)
        assert sub.drop == max_dropped, folder
        if expected is None:
            assert sub.score_s is None, folder
        else:
            assert sub.score_s is not None and sub.score_s / 60 == pytest.approx(expected, rel=1e-7), folder
        # ...and, where its compliance checker accepts the logs, the summarizer's own score (with scaling.json).
        with contextlib.redirect_stdout(io.StringIO()) as said:
            score, _, factor = summarizer._compute_strong_score_standalone(
                benchmark, folder.parent.name, False, str(folder), "training", _ruleset(folder / "x")
            )
        if score is not None:
            assert sub.scaled_s is not None and sub.scaled_s / 60 == pytest.approx(score, rel=1e-7), folder
            assert (sub.scaling_factor or 1.0) == pytest.approx(factor)
        else:  # its compliance checker (4.1) rejects logs of older rounds for format details, not convergence
            assert "Compliance check failed" in said.getvalue(), folder


def test_unet3d_drops_four_runs_each_end_and_counts_aborted_runs_as_slowest(store: Path) -> None:
    with duckdb.connect(str(store), read_only=True) as con:
        subs = [
            s
            for s in submissions(_view.build(con).runs)
            if s.folder.endswith("eos_n96_ngc23.09_mxnet/unet3d")
        ]
    (sub,) = subs
    assert len(sub.run_ids) == 40 and sub.drop == 4
    assert 1 <= sum(t is None for t in sub.times_s) <= 4 and sub.score_s is not None
    converged = sorted(t for t in sub.times_s if t is not None)
    assert sub.score_s == pytest.approx(sum(converged[4 : 40 - 4]) / 32)


def test_directions_and_targets_come_from_the_catalogue(store: Path) -> None:
    rows = query(
        store,
        "SELECT target_metric, stop_value, attrs ->> '$.mlperf.targets' FROM runs WHERE model = 'rnnt' LIMIT 1",
    )
    metric, target, targets = rows[0]
    assert (metric, target) == ("word_error_rate", 0.058)
    assert json.loads(targets)[0]["better"] == "lower"
    assert catalogue.direction("word_error_rate", {"benchmark": "rnnt", "round": "1.1"}) == "lower"
    assert catalogue.direction("mean_dice", {"benchmark": "unet3d", "round": "4.0"}) == "higher"
    # the target changed between rounds: bert 0.712 in v0.7, 0.720 from v1.0; ssd is RetinaNet from v2.0
    assert catalogue.mlperf("bert", "0.7").metrics[0].target == 0.712  # type: ignore[union-attr]
    assert catalogue.mlperf("bert", "2.0").metrics[0].target == 0.72  # type: ignore[union-attr]
    assert catalogue.mlperf("ssd", "1.0").metrics[0].target == 0.23  # type: ignore[union-attr]
    assert catalogue.mlperf("ssd", "4.0").metrics[0].target == 0.34  # type: ignore[union-attr]


def test_maskrcnn_time_to_accuracy_needs_both_bbox_and_segm(store: Path) -> None:
    from honestscale.analysis.scaling import time_to_accuracy

    with duckdb.connect(str(store), read_only=True) as con:
        runs = [r for r in _view.build(con).runs if r.model == "maskrcnn" and r.ok]
    assert runs
    for run in runs:
        tta = time_to_accuracy(run)
        assert tta is not None and run.started_at is not None
        at = run.started_at + tta
        got = {e.metric: e.value for e in run.evals if e.time == at}
        assert got["bbox_mAP"] >= 0.377 and got["segm_mAP"] >= 0.339
        earlier = [e for e in run.evals if e.time < at]
        for t in {e.time for e in earlier}:  # no earlier evaluation reached both
            vals = {e.metric: e.value for e in earlier if e.time == t}
            assert not (vals.get("bbox_mAP", 0) >= 0.377 and vals.get("segm_mAP", 0) >= 0.339)


def test_energy_to_train_from_the_power_logs(store: Path) -> None:
    rows = query(
        store,
        "SELECT source_file, started_at, stopped_at, energy_to_train_j FROM runs "
        "WHERE run_id LIKE 'mlperf:v4.0/smc-ac-power/%' ORDER BY run_id",
    )
    assert len(rows) == 5
    for source, start, stop, joules in rows:
        path = Path(source)
        folder = path.parent / "power" / path.stem
        # mlperf-logging's node integration (value x time since the reading before), fed the readings of the
        # run window with power_measurement_start/stop at run_start/run_stop (the logs' own stop line repeats
        # the start's time, on which the summarizer divides by zero)
        ref = 0.0
        for node in sorted(folder.glob("node_*.txt")):
            lines, _ = mlp_parser.parse_file(str(node), "4.0.0")
            window = [
                ll for ll in lines if ll.key == "power_reading" and start * 1000 < ll.timestamp <= stop * 1000
            ]
            for ll, key in ((window[0], "power_measurement_start"), (window[-1], "power_measurement_stop")):
                marker = type(ll)(
                    ll.full_string, (start if key.endswith("start") else stop) * 1000, key, {}, 0
                )
                window.append(marker)
            ref += summarizer._compute_power_node(window, (stop - start) * 1000)
        for sw in sorted(folder.glob("sw_*.txt")):
            lines, _ = mlp_parser.parse_file(str(sw), "4.0.0")
            ref += summarizer._compute_power_sw(lines, (stop - start) * 1000)
        assert len(list(folder.glob("node_*.txt"))) == 8
        # the only difference: the reading just after run_stop also covers the last seconds of the run
        assert joules == pytest.approx(ref, rel=0.02)
        assert 1e6 < joules < 1e9  # 8 nodes of 8 H100 at a few kW for ~2.5 minutes


def test_two_copies_of_a_submission_under_two_rounds_are_twice_the_runs(
    roots: tuple[Path, ...], tmp_path: Path
) -> None:
    org = ROOTS[0] / "v2.0" / "Dell"
    for rnd in ("v2.0", "v2.1"):
        shutil.copytree(org, tmp_path / rnd / "Dell")
    store = tmp_path / "s.duckdb"
    result = cli("ingest", tmp_path, "--store", store)
    assert result.returncode == 0, result.stderr
    n = len(list(org.glob("results/*/*/result_*.txt")))
    ids = [r[0] for r in query(store, "SELECT run_id FROM runs ORDER BY run_id")]
    assert len(ids) == 2 * n
    assert {i.split("/")[0] for i in ids} == {"mlperf:v2.0", "mlperf:v2.1"}
    assert "duplicate" not in result.stdout and "conflict" not in result.stderr.lower()


def test_cpu_only_systems_count_in_nodes_and_cores_never_in_accelerator_hours(store: Path) -> None:
    """Intel's Xeon submissions (v1.0 one 8-socket 8380H node, v3.1 four 2-socket 8480+ nodes): no accelerator, one
    worker per node, the cores from the system description; no accelerator-hours, node- and core-hours instead."""
    with contextlib.closing(duckdb.connect(str(store), read_only=True)) as con:
        runs = [r for r in _view.build(con).runs if r.system and ("SPR" in r.system or "8380H" in r.system)]
    assert runs
    for run in runs:
        desc = json.loads((ROOTS[0] / str(run.attrs["mlperf"]["round_folder"]) / "Intel" / "systems"
                           / f"{run.system}.json").read_text())  # fmt: skip
        nodes, sockets, cores = (int(str(desc[k]) or 0) for k in ("number_of_nodes", "host_processors_per_node",
                                                                   "host_processor_core_count"))  # fmt: skip
        assert run.cpu_only and run.accelerator is None and run.workers == nodes == run.n_nodes
        assert run.accelerator_hours() is None
        if not sockets * cores:  # a description without its core count: unknown, never guessed
            assert run.cores is None and run.core_hours() is None
            continue
        assert run.cores == nodes * sockets * cores
        if run.time_to_train_s is not None:
            assert run.core_hours() == pytest.approx(run.time_to_train_s * nodes * sockets * cores / 3600)
            assert run.node_hours() == pytest.approx(run.time_to_train_s * nodes / 3600)
    assert {r.workers for r in runs} == {1, 4}
