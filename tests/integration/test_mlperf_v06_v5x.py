"""MLPerf Training v0.6 (the ``:::MLL`` format) and v4.1-v5.1 logs (``../shared/data/mlperf-training-v06-v5x/``):
what only they hold.

Every quality judged in its own direction, with the targets of each round's compliance rules (``ATLEAST_ONE_CHECK``)
where mlperf-logging has one; Stable Diffusion's offline evaluations; logs in a format the reader does not know;
NVIDIA's v0.6 system files and other v0.6 forms; a benchmark the catalogue does not know; the olympic mean and the
official score said apart. Every result file's time, status, batch, accelerators and quality, and every submission's
score, against mlperf-logging's reading: ``test_mlperf_official.py``, over every data set.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import duckdb
import pytest

from honestscale import catalogue
from honestscale import view as _view
from honestscale.analysis.scaling import reached_at, time_to_accuracy
from tests.conftest import cli
from tests.mlperf import compliance_target, data_root, summarizer


@pytest.fixture(scope="module")
def root() -> Path:
    return data_root("mlperf-training-v06-v5x")


@pytest.fixture(scope="module")
def store(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("v06v5x") / "s.duckdb"
    result = cli("ingest", root, "--store", path)
    assert result.returncode == 0, result.stderr
    return path


def test_every_quality_is_judged_in_its_own_direction_and_every_successful_run_reached_it(
    store: Path,
) -> None:
    """Every run's benchmark is in the catalogue, its targets' directions are the catalogue's and its quality known;
    a one-metric benchmark's direction and target are its round's compliance rule's (the lower-is-better ones among
    them); every successful run reached its target at its last evaluation at or before run_stop."""
    with duckdb.connect(str(store), read_only=True) as con:
        runs = _view.build(con).runs
    checked = set()
    for run in runs:
        info = run.attrs["mlperf"]
        rules = catalogue.benchmark_of(info)
        assert rules is not None, run.id
        for target in info["targets"]:
            assert catalogue.direction(target["metric"], info) == target["better"]
        official = compliance_target(str(info["benchmark"]), str(info["round"]))
        if official is not None and len(rules.metrics) == 1:
            assert (rules.metrics[0].better, rules.metrics[0].target) == official, run.id
            checked.add(rules.name)
        assert catalogue.quality_known(run.final_metric, info), run.id
        if run.ok:
            # the catalogue's targets fit the logs: each successful run reached them, at its last evaluation
            # at or before run_stop (the run stopped because it did)
            reached = reached_at(run)
            assert reached is not None, run.id
            before = [
                e.time for e in run.evals if run.stopped_at is not None and e.time <= run.stopped_at + 1e-6
            ]
            assert reached == max(before), run.id
    lower = {"gpt3", "llama2_70b_lora", "llama31_405b", "llama31_8b", "flux1"}
    assert lower <= checked
    for name in lower:
        rules = catalogue.mlperf(name)
        assert rules is not None and rules.metrics[0].better == "lower"
    sd = catalogue.mlperf("stable_diffusion", "5.0")
    assert sd is not None and {m.name: m.better for m in sd.metrics} == {"FID": "lower", "CLIP": "higher"}


def test_offline_evaluations_are_placed_at_their_checkpoint(store: Path) -> None:
    """Stable Diffusion: the checkpoint that met both targets is the one run_stop is stamped at, so its time to
    accuracy is its time to train; the evaluations logged after run_stop are all kept."""
    with duckdb.connect(str(store), read_only=True) as con:
        runs = [r for r in _view.build(con).runs if r.model == "stable_diffusion"]
    assert len(runs) == 20
    for run in runs:
        assert {e.metric for e in run.evals} == {"FID", "CLIP"}
        if not run.ok:
            continue
        assert time_to_accuracy(run) == pytest.approx(run.time_to_train_s, abs=1e-6), run.id
        at = reached_at(run)
        both = {e.metric: e.value for e in run.evals if e.time == at}
        assert both["FID"] <= 90 and both["CLIP"] >= 0.15
        # no earlier checkpoint met both
        for t in {e.time for e in run.evals if at is not None and e.time < at}:
            vals = {e.metric: e.value for e in run.evals if e.time == t}
            assert not (vals.get("FID", 999) <= 90 and vals.get("CLIP", 0) >= 0.15), run.id
    google = [r for r in runs if "cloud-tpu" in r.id]
    # 5 of 10 Google files evaluated a later checkpoint too: kept, placed after the run's end
    later = [r for r in google if any(r.stopped_at is not None and e.time > r.stopped_at for e in r.evals)]
    assert len(later) == 5


def test_a_log_in_an_unknown_mlperf_format_is_named_and_exits_3(root: Path, tmp_path: Path) -> None:
    """A v0.5 ``:::MLPv0.5.0`` log and a text file are each named with their reason, exit 3 and no traceback; a good
    log ingested beside them lands."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "result_0.txt").write_text(
        "starting\n:::MLPv0.5.0 resnet 1541710001.361 (resnet/imagenet_main.py:251) run_start\n"
        ":::MLPv0.5.0 resnet 1541713001.361 (resnet/imagenet_main.py:351) run_stop\n",
        encoding="utf-8",
    )
    good = root / "v0.6" / "Google" / "results" / "tpu-v3-128" / "resnet" / "result_0.txt"
    (folder / "notes.txt").write_text("nothing here\n", encoding="utf-8")
    store = tmp_path / "s.duckdb"
    alone = cli("ingest", folder, "--store", store)
    assert alone.returncode == 3, alone.stderr
    assert "result_0.txt" in alone.stderr and "format this reader does not know" in alone.stderr
    assert "notes.txt" in alone.stderr and "Traceback" not in alone.stderr
    both = cli("ingest", folder, good, "--store", store)
    assert both.returncode == 3 and "1 runs touched" in both.stdout, both.stdout


def test_nvidia_v06_system_files_are_read_in_their_own_form_and_a_broken_one_is_said(
    root: Path, tmp_path: Path
) -> None:
    """NVIDIA's v0.6 system files (``key: {json}`` lines, the entry a Python literal) are read in that form; one
    whose entry's ``nodes`` is broken is named with its reason (exit 3), and the run lands with the rest of what it
    says, its node count unknown."""
    src = root / "v0.6" / "NVIDIA"
    system = "dgx2h_n4_ngc19.05_pytorch"
    tree = tmp_path / "v0.6" / "NVIDIA"
    (tree / "systems").mkdir(parents=True)
    (tree / "results" / system / "ssd").mkdir(parents=True)
    log = tree / "results" / system / "ssd" / "result_0.txt"
    log.write_bytes((src / "results" / system / "ssd" / "result_0.txt").read_bytes())
    text = (src / "systems" / f"{system}.json").read_text(encoding="utf-8")
    (tree / "systems" / f"{system}.json").write_text(
        text.replace("'nodes': \\\"{", "'nodes': \\\"{{"), encoding="utf-8"
    )
    store = tmp_path / "s.duckdb"
    result = cli("ingest", tree, "--store", store)
    assert result.returncode == 3, result.stderr
    assert f"{system}.json" in result.stderr and "could not read entry.nodes" in result.stderr
    with duckdb.connect(str(store), read_only=True) as con:
        row = con.execute("SELECT system, framework, n_nodes, status FROM runs").fetchone()
    assert row == ("4xNVIDIA DGX-2H", "PyTorch NVIDIA Release 19.05", None, "success")


def test_a_benchmark_not_in_the_catalogue_is_landed_with_its_quality_unknown(
    root: Path, tmp_path: Path
) -> None:
    """A benchmark the catalogue does not know keeps the log's own name for its quality, no target and no
    direction; HS101 says it cannot verify a scaling series of it (1 and 2 nodes of one system)."""
    org = root / "v5.1" / "Supermicro"
    text = (org / "results" / "ARS-121GL-NB3" / "flux1" / "result_01.txt").read_text(encoding="utf-8")
    desc = json.loads((org / "systems" / "ARS-121GL-NB3.json").read_text(encoding="utf-8"))
    for nodes in (1, 2):
        system = f"acme-n{nodes}"
        folder = tmp_path / "v5.1" / "Acme" / "results" / system / "flux9"
        folder.mkdir(parents=True)
        (folder / "result_0.txt").write_text(
            text.replace('"value": "flux1"', '"value": "flux9"'), encoding="utf-8"
        )
        (tmp_path / "v5.1" / "Acme" / "systems").mkdir(exist_ok=True)
        desc.update(number_of_nodes=str(nodes), system_name="Acme")
        (tmp_path / "v5.1" / "Acme" / "systems" / f"{system}.json").write_text(
            json.dumps(desc), encoding="utf-8"
        )
    store = tmp_path / "s.duckdb"
    result = cli("ingest", tmp_path / "v5.1", "--store", store)
    assert result.returncode == 0, result.stderr
    assert "'flux9' of round 5.1 is not in the catalogue" in result.stderr
    with duckdb.connect(str(store), read_only=True) as con:
        runs = _view.build(con).runs
    assert len(runs) == 2
    for run in runs:
        assert run.final_metric == "eval_accuracy" and run.stop_value is None
        assert not catalogue.quality_known(run.final_metric, run.attrs["mlperf"])
    lint = cli("lint", "--store", store, "--select", "HS101", "--format", "json")
    findings = [f for f in json.loads(lint.stdout) if f["code"] == "HS101"]
    assert [f["outcome"] for f in findings] == ["cannot_verify"], lint.stdout
    assert "'flux9'" in findings[0]["message"] and "unknown" in findings[0]["message"]


def test_report_and_runs_say_olympic_mean_and_official_score_apart(root: Path, tmp_path: Path) -> None:
    """A submission with a scaling.json factor: the report's points and ``runs`` carry the factor, the olympic mean
    and the official score (mean x factor, the summarizer's) apart."""
    folder = root / "v5.0" / "NVIDIA" / "results" / "tyche_ngpu72_ngc25.04_pytorch" / "retinanet"
    store = tmp_path / "s.duckdb"
    assert cli("ingest", folder, "--store", store).returncode == 0
    factor = summarizer._get_scaling_factor(str(folder))
    assert factor != 1.0
    with contextlib.redirect_stdout(io.StringIO()):
        official, _, _ = summarizer._compute_strong_score_standalone(
            "retinanet", folder.parent.name, False, str(folder), "training", "5.0.0"
        )
    model = json.loads(cli("report", "--store", store, "--format", "json").stdout)
    points = [p for c in model["comparisons"] for p in c["points"] if p.get("mlperf_score_s")]
    assert points
    for p in points:
        assert p["mlperf_scaling_factor"] == pytest.approx(factor)
        assert p["mlperf_official_s"] == pytest.approx(p["mlperf_score_s"] * factor)
        assert p["mlperf_official_s"] / 60 == pytest.approx(official, rel=1e-9)
    runs = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert len(runs) == 5 and all(r["mlperf_scaling_factor"] == pytest.approx(factor) for r in runs)


# Lines as v0.6 submissions outside ../shared/data wrote them (training_results_v0.6: Intel's minigo wrote the
# metadata as a Python dict, NVIDIA's Mask R-CNN nests its two values under "accuracy", Fujitsu's system file is
# JSON in the entry form with a list of node types).
V06_LOG = """\
:::MLL 1560873515.984077135 cache_clear: {value: true, metadata: {lineno: 0, file: manual}}
:::MLL 1560873523.355233 init_start: {"value": null, "metadata": {'lineno': 742, 'file': 'ml_perf/reference_implementation.py'}}
:::MLL 1560873600.0 submission_benchmark: {"value": "maskrcnn", "metadata": {"file": "mlperf_log_utils.py", "lineno": 1}}
:::MLL 1560873600.1 global_batch_size: {"value": 96, "metadata": {'lineno': 5, 'file': 'train.py'}}
:::MLL 1560873710.141025 run_start: {"value": null, "metadata": {'lineno': 615, 'file': 'ml_perf/reference_implementation.py'}}
:::MLL 1560874710.0 eval_accuracy: {"value": {"accuracy": {"BBOX": 0.3568, "SEGM": 0.3281}}, "metadata": {"epoch_num": 12}}
:::MLL 1560875610.0 eval_accuracy: {"value": {"accuracy": {"BBOX": 0.3799, "SEGM": 0.3455}}, "metadata": {"epoch_num": 13}}
:::MLL 1560875622.040346 run_stop: {"value": null, "metadata": {'lineno': 53, 'file': 'ml_perf/eval_models.py', 'status': 'success'}}
"""
FUJITSU_SYSTEM = {
    "division": "open",
    "hardware": "CX2570-m4 ABCI(AIST)",
    "framework": "custom MXNet 1.3.1",
    "libraries": "CentOS 7.5 / cuda_version 9.2.148.1",
    "nodes": [{"num_nodes": 512, "accelerator": "Tesla V100-SXM2-16GB", "num_accelerators": 4}],
}


def test_v06_python_literal_metadata_nested_values_and_the_json_entry_form(tmp_path: Path) -> None:
    """v0.6 forms outside ../shared/data: metadata as a Python dict, Mask R-CNN's two values nested under
    "accuracy", a system file in the JSON entry form; a line neither JSON nor Python is quarantined (exit 3)."""
    org = tmp_path / "v0.6" / "Acme"
    (org / "systems").mkdir(parents=True)
    (org / "systems" / "abci.json").write_text(json.dumps(FUJITSU_SYSTEM), encoding="utf-8")
    folder = org / "results" / "abci" / "maskrcnn"
    folder.mkdir(parents=True)
    (folder / "result_0.txt").write_text(V06_LOG, encoding="utf-8")
    store = tmp_path / "s.duckdb"
    result = cli("ingest", tmp_path, "--store", store)
    # the cache_clear line with unquoted names is neither JSON nor Python: quarantined with its reason (exit 3)
    assert result.returncode == 3 and "1 lines quarantined" in result.stdout, result.stdout + result.stderr
    with duckdb.connect(str(store), read_only=True) as con:
        row = con.execute(
            "SELECT status, time_to_train_s, global_batch_size, n_nodes * accelerators_per_node, final_quality "
            "FROM runs"
        ).fetchone()
        (reason,) = con.execute("SELECT reason FROM quarantine").fetchone()  # type: ignore[misc]
    assert row is not None and row[:4] == ("success", pytest.approx(1911.899321, abs=1e-3), 96, 2048)
    assert json.loads(row[4]) == {"bbox_mAP": 0.3799, "segm_mAP": 0.3455}
    assert "not valid JSON" in reason
