"""MLPerf Training logs of every round (v0.6 to v6.0) against the official reader, mlperf-logging.

Each data set under ``../shared/data/`` is ingested into a store of its own; every result file in it must be one run
whose time to train, status, global batch, accelerator count and final quality equal what mlperf-logging's parser
(``compliance_checker.mlp_parser``) reads from the same file, and every submission's olympic mean and official score
(times ``scaling.json``'s factor) what its result summarizer computes. The checks are the same for every data set;
what differs (how many files and submissions, the rounds, statuses and benchmarks there, the folders with too few runs
to score, the folders the summarizer does not score and why, how close a score must come) is data, in ``DATA_SETS``.

mlperf-logging reads v0.6's ``:::MLL`` lines (ruleset 0.6.0), but its timestamps are the log's **seconds** while its
scoring assumes milliseconds: the reference converts (seconds here, the summarizer's score x 1000 where it scores a
v0.6 folder at all). Its compliance checker (4.1) rejects some logs of older rounds for format details, not
convergence: there it prints why and gives no score, ours is checked against its olympic average alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from honestscale import catalogue
from honestscale import view as _view
from honestscale.analysis.mlperf import submissions
from tests.conftest import (
    assert_run_as_reference,
    cli,
    reference_olympic_minutes,
    runs_by_file,
    submission_id,
)
from tests.mlperf import data_root, official_score, reference, result_files, round_of, summarizer

# What the summarizer prints where its compliance checker rejects a log of the folder.
REJECTED = "Compliance check failed"


@dataclass(frozen=True)
class DataSet:
    """One data set of MLPerf Training logs, ``../shared/data/<name>``, and what the comparison finds in it."""

    name: str
    files: int  # result files, one run each
    not_landed: int  # other files (README, MANIFEST, licences): named by the ingest, none of them a result
    rounds: frozenset[str]
    statuses: frozenset[str]  # honestscale's names
    benchmarks: frozenset[str]  # the catalogue's names
    folders: int  # submissions: <round>/<org>/results/<system>/<benchmark>
    scaled: int  # submissions whose scaling.json factor is not 1 (the official score needs it)
    # folders with fewer runs than an olympic mean needs (neither we nor the summarizer score them) -> our note's
    # start: how many runs of how many the rules ask
    unscored: Mapping[str, str] = field(default_factory=dict)
    # folders the summarizer gives no score of its own -> what it says why
    no_official: Mapping[str, str] = field(default_factory=dict)
    # how close a score is to the summarizer's: the store keeps times as epoch seconds (float64, ~0.2 us apart),
    # which moves a mean of short runs by a few 1e-9 of it (v1.1 NVIDIA resnet, v2.0 Google resnet: 0.2-0.6 min)
    rel: float = 1e-9


DATA_SETS = (
    DataSet(
        "mlperf-training-v06-v5x",
        files=157,
        not_landed=5,
        rounds=frozenset({"0.6", "4.1", "5.0", "5.1"}),
        statuses=frozenset({"success", "aborted", "incomplete"}),
        benchmarks=frozenset(
            [
                "bert",
                "flux1",
                "gpt3",
                "llama2_70b_lora",
                "llama31_405b",
                "llama31_8b",
                "maskrcnn",
                "resnet",
                "retinanet",
                "rgat",
                "ssd",
                "stable_diffusion",
                "transformer",
            ]
        ),
        folders=22,
        scaled=10,
        no_official={
            # its v0.6 rules have no file for the benchmark Google's Mask R-CNN logs name "mask"
            "v0.6/Google/results/tpu-v3-128/mask": "training_0.6.0/mask.yaml",
            "v0.6/Google/results/tpu-v3-128/resnet": REJECTED,
            "v0.6/Google/results/tpu-v3-128/ssd": REJECTED,
            "v0.6/Google/results/tpu-v3-128/transformer": REJECTED,
        },
    ),
    DataSet(
        "mlperf-training-v0.7",
        files=20,
        not_landed=1,
        rounds=frozenset({"0.7"}),
        statuses=frozenset({"success"}),
        benchmarks=frozenset({"resnet"}),
        folders=4,
        scaled=0,
    ),
    DataSet(
        "mlperf-training-v1x",
        files=203,
        not_landed=8,
        rounds=frozenset({"1.0", "1.1", "2.0", "2.1", "3.1", "4.0"}),
        statuses=frozenset({"success", "aborted", "failed", "incomplete"}),
        benchmarks=frozenset(
            [
                "bert",
                "dlrm",
                "dlrm_dcnv2",
                "gpt3",
                "llama2_70b_lora",
                "maskrcnn",
                "resnet",
                "rnnt",
                "ssd",
                "unet3d",
            ]
        ),
        folders=22,
        scaled=3,
        rel=1e-8,
        no_official={
            "v1.1/Azure/results/nd96amsr_a100_v4_ngc21.09_pytorch/bert": REJECTED,
            "v1.1/Graphcore/results/ipu-pod64-TF1/resnet": REJECTED,
            "v1.1/NVIDIA/results/dgxa100_n128_ngc21.09_mxnet/resnet": REJECTED,
        },
    ),
    DataSet(
        "mlperf-training-v6",
        files=32,
        not_landed=2,
        rounds=frozenset({"6.0"}),
        statuses=frozenset({"success"}),
        benchmarks=frozenset({"llama2_70b_lora", "gpt_oss_20b", "deepseekv3_671b"}),
        folders=5,
        scaled=0,
        # 1 of the 10 (gpt_oss_20b) or of the 3 (deepseekv3_671b) runs the rules ask: a partial folder
        unscored={
            "v6.0/CoreWeave/results/CoreWeave_B200_8x8/gpt_oss_20b": "no score: 1 runs of the 10 the rules ask",
            "v6.0/CoreWeave/results/CoreWeave_GB300_512x4/deepseekv3_671b": "no score: 1 runs of the 3 the rules ask",
        },
    ),
)


@pytest.fixture(scope="module", params=DATA_SETS, ids=lambda d: d.name.removeprefix("mlperf-training-"))
def data_set(request: pytest.FixtureRequest) -> DataSet:
    chosen: DataSet = request.param
    return chosen


@pytest.fixture(scope="module")
def root(data_set: DataSet) -> Path:
    return data_root(data_set.name)


@pytest.fixture(scope="module")
def store(data_set: DataSet, root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp(data_set.name) / "s.duckdb"
    result = cli("ingest", root, "--store", path)
    assert result.returncode == 0, result.stderr
    # every file found is named: the folder's README, MANIFEST and licences are not results, nothing is lost
    said = "not landed, neither a honestscale event file nor an MLPerf log nor a log an importer reads"
    assert f"{said} ({data_set.not_landed})" in result.stderr, result.stderr
    assert "hold results that did not land" not in result.stderr
    return path


def _reference_quality(final: dict[str, Any], rules: catalogue.Benchmark) -> tuple[dict[str, Any], Any]:
    """mlperf-logging's final quality of a run by the catalogue's metric names, and its value where it is one
    number (the run's target metric) else None."""
    names = {m.key: m.name for m in rules.metrics}
    if set(final) != {""}:  # one line per metric (Stable Diffusion's FID and CLIP)
        return {names[k]: v for k, v in final.items()}, None
    value = final[""]
    if isinstance(value, list):  # v0.6 Mask R-CNN: [bbox, segm] in the catalogue's order
        value = dict(zip((m.key for m in rules.metrics), value, strict=True))
    if isinstance(value, dict):  # Mask R-CNN: one value per metric, by the log's key
        return {names[k]: v for k, v in value.items()}, None
    return {rules.metrics[0].name: value}, value


def test_every_result_file_is_one_run_equal_to_the_reference(
    data_set: DataSet, root: Path, store: Path
) -> None:
    """Every result file is one run whose status, time to train, global batch, accelerator count and final quality
    (each metric by the catalogue's name; one metric: the run's target and final value) are mlperf-logging's reading
    of the file; its benchmark is in the catalogue, and the data set's rounds, statuses and benchmarks are all seen."""
    files = result_files(root)
    assert len(files) == data_set.files
    runs = runs_by_file(store)
    assert set(runs) == {str(p) for p in files}
    rounds, statuses, benchmarks = set(), set(), set()
    for path in files:
        ref, run = reference(path), runs[str(path)]
        where = str(path.relative_to(root))
        assert_run_as_reference(run, ref, where)
        rules = catalogue.mlperf(ref["benchmark"], round_of(path))
        assert rules is not None, f"{where}: benchmark not in the catalogue"
        rounds.add(round_of(path))
        statuses.add(run["status"])
        benchmarks.add(rules.name)
        assert ref["final"], f"{where}: no evaluation"
        quality, value = _reference_quality(ref["final"], rules)
        assert json.loads(run["final_quality"]) == {k: pytest.approx(v) for k, v in quality.items()}, where
        if value is not None:
            assert run["target_metric"] == rules.metrics[0].name, where
            assert run["final_value"] == pytest.approx(value), where
    assert rounds == data_set.rounds
    assert statuses == data_set.statuses
    assert benchmarks == data_set.benchmarks


def test_every_submission_score_is_the_summarizers(data_set: DataSet, root: Path, store: Path) -> None:
    """Every submission drops what the rules drop (4 runs at each end for unet3d, else 1), carries scaling.json's
    factor, and its olympic mean and official score (mean x factor) are mlperf-logging's: the summarizer's olympic
    average over the runs its reader sees converge, and its own score where it gives one (where not, the data set
    says why, in its words); a folder with too few runs has neither score, and its note says why."""
    with duckdb.connect(str(store), read_only=True) as con:
        ours = {s.folder: s for s in submissions(_view.build(con).runs)}
    folders = sorted({p.parent for p in result_files(root)})
    assert len(ours) == len(folders) == data_set.folders
    assert {*data_set.unscored, *data_set.no_official} <= {str(f.relative_to(root)) for f in folders}
    scaled = 0
    for folder in folders:
        rel, sub = str(folder.relative_to(root)), ours[submission_id(folder)]
        benchmark = summarizer._benchmark_alias(folder.name)
        rules = catalogue.mlperf(benchmark, round_of(folder))
        assert rules is not None and sub.drop == rules.drop == (4 if benchmark == "unet3d" else 1), rel
        factor = summarizer._get_scaling_factor(str(folder))
        scaled += factor != 1.0
        assert (sub.scaling_factor or 1.0) == pytest.approx(factor), rel
        expected = reference_olympic_minutes(folder, reference, sub.drop)
        official, official_factor, said = official_score(folder)
        if rel in data_set.unscored:
            assert expected is None and sub.score_s is None and sub.scaled_s is None, rel
            assert sub.note.startswith(data_set.unscored[rel]), sub.note
            assert f"fewer than the {2 * sub.drop + 1}" in sub.note, sub.note  # an olympic mean needs
            assert official is None, rel
            continue
        assert expected is not None and sub.score_s is not None and sub.scaled_s is not None, rel
        assert sub.score_s / 60 == pytest.approx(expected, rel=data_set.rel), rel
        assert sub.scaled_s / 60 == pytest.approx(expected * factor, rel=data_set.rel), rel
        if rel in data_set.no_official:
            assert official is None and data_set.no_official[rel] in said, (rel, said)
            continue
        # v0.6 logs seconds, which the summarizer reads as milliseconds: its score is ours / 1000
        scale = 1000.0 if round_of(folder) == "0.6" else 1.0
        assert official is not None, (rel, said)
        assert sub.scaled_s / 60 == pytest.approx(official * scale, rel=data_set.rel), rel
        assert official_factor == pytest.approx(factor), rel
    assert scaled == data_set.scaled
