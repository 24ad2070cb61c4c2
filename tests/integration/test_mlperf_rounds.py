"""MLPerf Training v1.0 to v4.0 logs (``../shared/data/mlperf-training-v1x/``): what only they hold.

unet3d's olympic mean dropping 4 runs at each end, the quality targets and directions of older rounds (RNN-T's word
error rate, BERT's and SSD's targets that changed between rounds), Mask R-CNN's time to accuracy on two metrics, the
energy to train from v4.0's power logs, a submission copied under two rounds, and CPU-only systems. Every result
file's time, status, batch, accelerators and quality, and every submission's score, against mlperf-logging's reading:
``test_mlperf_official.py``, over every data set.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from honestscale import catalogue
from honestscale import view as _view
from honestscale.analysis.mlperf import submissions
from tests.conftest import cli, query
from tests.mlperf import data_root, mlp_parser, summarizer


@pytest.fixture(scope="module")
def root() -> Path:
    return data_root("mlperf-training-v1x")


@pytest.fixture(scope="module")
def store(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rounds") / "s.duckdb"
    result = cli("ingest", root, "--store", path)
    assert result.returncode == 0, result.stderr
    return path


def test_unet3d_drops_four_runs_each_end_and_counts_aborted_runs_as_slowest(store: Path) -> None:
    """NVIDIA's v4.0 unet3d submission (40 runs): 4 dropped at each end, its 1-4 runs that did not converge counted
    as the slowest, the score the mean of the 32 left."""
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
    """RNN-T's word error rate is judged lower is better with its target stored, unet3d's dice higher; a target that
    changed between rounds (BERT 0.712 then 0.720, SSD then RetinaNet) is the round's."""
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
    """A successful Mask R-CNN run's time to accuracy is its first evaluation at which both bbox (0.377) and segm
    (0.339) mAP reached their targets."""
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
    """The energy to train of v4.0's power submission (5 runs, 8 nodes' and the switches' readings each) is, within
    2 %, mlperf-logging's integration of the readings over the run's window."""
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


def test_two_copies_of_a_submission_under_two_rounds_are_twice_the_runs(root: Path, tmp_path: Path) -> None:
    """The same organisation's logs under two round folders are two sets of runs, not duplicates or conflicts."""
    org = root / "v2.0" / "Dell"
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


def test_cpu_only_systems_count_in_nodes_and_cores_never_in_accelerator_hours(
    root: Path, store: Path
) -> None:
    """Intel's Xeon submissions (v1.0 one 8-socket 8380H node, v3.1 four 2-socket 8480+ nodes): no accelerator, one
    worker per node, the cores from the system description; no accelerator-hours, node- and core-hours instead."""
    with contextlib.closing(duckdb.connect(str(store), read_only=True)) as con:
        runs = [r for r in _view.build(con).runs if r.system and ("SPR" in r.system or "8380H" in r.system)]
    assert runs
    for run in runs:
        systems = root / str(run.attrs["mlperf"]["round_folder"]) / "Intel" / "systems"
        desc = json.loads((systems / f"{run.system}.json").read_text())
        keys = ("number_of_nodes", "host_processors_per_node", "host_processor_core_count")
        nodes, sockets, cores = (int(str(desc[k]) or 0) for k in keys)
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
