"""MLPerf Training v0.6 (the ``:::MLL`` format) and v4.1-v5.1 logs against the official reader, mlperf-logging.

Every result file under ``../shared/data/mlperf-training-v06-v5x/`` must be one run whose time to train, status,
global batch, accelerator count and final quality equal what mlperf-logging's parser reads from the same file;
every submission's olympic mean and official score (times ``scaling.json``'s factor) must equal what its result
summarizer computes. mlperf-logging reads v0.6's ``:::MLL`` lines (ruleset 0.6.0), but its timestamps are the
log's **seconds** while its scoring assumes milliseconds: the reference converts (seconds here, its score x 1000
where it scores a v0.6 folder at all). The quality targets and their directions are checked against the
``ATLEAST_ONE_CHECK`` of each round's compliance rules where mlperf-logging has one.
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
from honestscale.analysis.mlperf import submissions
from honestscale.analysis.scaling import reached_at, time_to_accuracy
from tests.conftest import (
    REPO,
    assert_run_as_reference,
    cli,
    reference_olympic_minutes,
    runs_by_file,
    submission_id,
)
from tests.mlperf import compliance_target, reference, round_of, summarizer

ROOT = REPO.parent / "shared" / "data" / "mlperf-training-v06-v5x"


def result_files() -> list[Path]:
    return sorted(p for p in ROOT.glob("*/*/results/*/*/result_*.txt"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not ROOT.is_dir():
        pytest.fail(f"MLPerf logs missing at {ROOT}: ../shared/data must be beside the repo")
    path = tmp_path_factory.mktemp("v06v5x") / "s.duckdb"
    result = cli("ingest", ROOT, "--store", path)
    assert result.returncode == 0, result.stderr
    # every file found is named: the folder's README, MANIFEST and licences are not results, nothing is lost
    assert (
        "not landed, neither a honestscale event file nor an MLPerf log nor a log an importer reads (5)"
        in result.stderr
    )
    assert "hold results that did not land" not in result.stderr
    return path


def test_every_result_file_is_one_run_equal_to_the_reference(store: Path) -> None:
    files = result_files()
    assert len(files) == 157
    runs = runs_by_file(store)
    assert set(runs) == {str(p.resolve()) for p in files}
    rounds, statuses = set(), set()
    for path in files:
        ref, run = reference(path), runs[str(path.resolve())]
        where = str(path.relative_to(ROOT))
        rounds.add(round_of(path))
        assert_run_as_reference(run, ref, where)
        statuses.add(run["status"])
        rules = catalogue.mlperf(ref["benchmark"], round_of(path))
        assert rules is not None, f"{where}: benchmark not in the catalogue"
        quality = json.loads(run["final_quality"])
        final = ref["final"]
        if set(final) == {""}:
            value = final[""]
            if isinstance(value, list):  # v0.6 Mask R-CNN: [bbox, segm] in the catalogue's order
                value = dict(zip((m.key for m in rules.metrics), value, strict=True))
            if isinstance(value, dict):
                names = {m.key: m.name for m in rules.metrics}
                assert quality == {names[k]: pytest.approx(v) for k, v in value.items()}, where
            else:
                assert quality == {run["target_metric"]: pytest.approx(value)}, where
        else:  # one line per metric (Stable Diffusion's FID and CLIP)
            names = {m.key: m.name for m in rules.metrics}
            assert quality == {names[k]: pytest.approx(v) for k, v in final.items()}, where
    assert rounds == {"0.6", "4.1", "5.0", "5.1"}
    assert statuses == {"success", "aborted", "incomplete"}


def test_every_quality_is_judged_in_its_own_direction_and_every_successful_run_reached_it(
    store: Path,
) -> None:
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


def test_every_submission_score_is_the_official_one(store: Path) -> None:
    with duckdb.connect(str(store), read_only=True) as con:
        ours = {s.folder: s for s in submissions(_view.build(con).runs)}
    folders = sorted({p.parent for p in result_files()})
    assert len(ours) == len(folders) == 22
    factors = 0
    for folder in folders:
        sub = ours[submission_id(folder)]
        benchmark = summarizer._benchmark_alias(folder.name)
        rules = catalogue.mlperf(benchmark, round_of(folder / "x"))
        assert rules is not None and sub.drop == rules.drop == (4 if benchmark == "unet3d" else 1)
        expected = reference_olympic_minutes(folder, reference, sub.drop)
        factor = summarizer._get_scaling_factor(str(folder))
        factors += factor != 1.0
        assert (sub.scaling_factor or 1.0) == pytest.approx(factor), folder
        if expected is None:
            assert sub.score_s is None and sub.scaled_s is None, folder
            continue
        assert sub.score_s is not None and sub.score_s / 60 == pytest.approx(expected, rel=1e-9), folder
        assert sub.scaled_s is not None and sub.scaled_s / 60 == pytest.approx(expected * factor, rel=1e-9), (
            folder
        )
        # the summarizer's own score where its compliance checker accepts the logs; for v0.6 it reads seconds
        # as milliseconds, so its score is ours / 1000
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(FileNotFoundError):
            official, _, got = summarizer._compute_strong_score_standalone(
                benchmark, folder.parent.name, False, str(folder), "training", f"{round_of(folder / 'x')}.0"
            )
            if official is not None:
                scale = 1000.0 if round_of(folder / "x") == "0.6" else 1.0
                assert sub.scaled_s / 60 == pytest.approx(official * scale, rel=1e-9), folder
                assert got == pytest.approx(factor)
    assert factors >= 8  # the factor is not 1 for most newer submissions: the official score needs it


def test_a_log_in_an_unknown_mlperf_format_is_named_and_exits_3(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "result_0.txt").write_text(
        "starting\n:::MLPv0.5.0 resnet 1541710001.361 (resnet/imagenet_main.py:251) run_start\n"
        ":::MLPv0.5.0 resnet 1541713001.361 (resnet/imagenet_main.py:351) run_stop\n",
        encoding="utf-8",
    )
    good = ROOT / "v0.6" / "Google" / "results" / "tpu-v3-128" / "resnet" / "result_0.txt"
    (folder / "notes.txt").write_text("nothing here\n", encoding="utf-8")
    store = tmp_path / "s.duckdb"
    alone = cli("ingest", folder, "--store", store)
    assert alone.returncode == 3, alone.stderr
    assert "result_0.txt" in alone.stderr and "format this reader does not know" in alone.stderr
    assert "notes.txt" in alone.stderr and "Traceback" not in alone.stderr
    both = cli("ingest", folder, good, "--store", store)
    assert both.returncode == 3 and "1 runs touched" in both.stdout, both.stdout


def test_nvidia_v06_system_files_are_read_in_their_own_form_and_a_broken_one_is_said(tmp_path: Path) -> None:
    src = ROOT / "v0.6" / "NVIDIA"
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


def test_a_benchmark_not_in_the_catalogue_is_landed_with_its_quality_unknown(tmp_path: Path) -> None:
    """A benchmark the catalogue does not know keeps the log's own name for its quality, no target and no
    direction; HS101 says it cannot verify a scaling series of it (1 and 2 nodes of one system)."""
    org = ROOT / "v5.1" / "Supermicro"
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


def test_report_and_runs_say_olympic_mean_and_official_score_apart(tmp_path: Path) -> None:
    folder = ROOT / "v5.0" / "NVIDIA" / "results" / "tyche_ngpu72_ngc25.04_pytorch" / "retinanet"
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
