"""Time to solution as a kind of scaling, on every MLPerf round in ``../shared/data`` and the v2.0 scaling series
(``tests/data/mlperf-v2.0-scaling``), and a rule's reach: a rule about a series marks its ratios, never the number
of one point (issue 75).

Every MLPerf benchmark trains each scale to one quality target with a batch its submitter chooses per scale: neither
strong nor weak scaling by batch, but the comparison the twelve ways recommend. The expected kinds and targets are
read here from the store's runs table with a few lines of SQL, the official scores from mlperf-logging's own parser,
never from honestscale's classification.
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, cli, query
from tests.mlperf import DATA, data_root, official_score, reference, scaling_series

SCALING = REPO / "tests" / "data" / "mlperf-v2.0-scaling"
V07_NVIDIA = REPO / "tests" / "data" / "mlperf-v0.7-nvidia"
ROUNDS = (
    "mlperf-training-v06-v5x",
    "mlperf-training-v0.7",
    "mlperf-training-v1x",
    "mlperf-training-v6",
    "mlperf-hpc",
)
NVIDIA_BERT_64 = SCALING / "v2.0" / "NVIDIA" / "results" / "dgxa100_n8_ngc22.04_pytorch" / "bert"


@pytest.fixture(scope="module")
def every_round(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("tts") / "s.duckdb"
    got = cli("ingest", *(data_root(r) for r in ROUNDS), SCALING, V07_NVIDIA, "--store", store)
    assert got.returncode == 0, got.stderr
    return store


def _json(*args: Any) -> Any:
    got = cli(*args, "-f", "json")
    assert got.returncode in (0, 1), got.stderr
    return json.loads(got.stdout)


def _expected_kind(store: Path, run_ids: list[str]) -> str:
    """strong where every run has one global batch; time to solution where the successful runs share one target
    (metric and value) and the batch changes; from the runs table, not from honestscale's classification."""
    marks = ",".join("?" * len(run_ids))
    batches = query(store, f"SELECT n_accelerators, list(DISTINCT global_batch_size) FROM runs "
                           f"WHERE run_id IN ({marks}) GROUP BY 1", list(run_ids))  # fmt: skip
    targets = query(store, f"SELECT DISTINCT stop_criterion, target_metric, stop_value FROM runs "
                           f"WHERE run_id IN ({marks}) AND status = 'success'", list(run_ids))  # fmt: skip
    if all(len(b) == 1 for _, b in batches) and len({b[0] for _, b in batches}) == 1:
        return "strong"
    return "time_to_solution" if len(targets) == 1 and targets[0][0] == "target_accuracy" else "other"


def test_every_mlperf_series_with_one_target_is_time_to_solution_and_hs111_marks_none(
    every_round: Path,
) -> None:
    model = _json("report", "--store", every_round)
    series = [c for c in model["comparisons"] if c["kind"] == "scaling"]
    mlperf = [c for c in series if all(r.startswith("mlperf:") for r in c["runs"])]
    assert len(mlperf) == len(series) >= 10
    kinds = {c["label"]: (c["mode"], _expected_kind(every_round, c["runs"])) for c in mlperf}
    assert all(got == want for got, want in kinds.values()), kinds
    assert sum(got == "time_to_solution" for got, _ in kinds.values()) >= 9, kinds
    for c in mlperf:  # the kind is printed with the target it shares, as every output prints it
        if c["mode"] == "time_to_solution":
            assert c["mode_note"].startswith("Time to solution: every run trains to one quality target ("), c
        for p in c["points"]:  # no time ratio, throughput ratio or point carries HS111
            for lint in (p["lint"], p["ratio_lint"], p["rate_ratio_lint"]):
                assert "HS111" not in lint["fail"] + lint["cannot_verify"], (c["label"], p["workers"])
    findings = _json("lint", "--store", every_round)
    assert not [f for f in findings if f["code"] == "HS111"], "an MLPerf result declares time to solution"
    text = cli("lint", "--store", every_round).stdout
    assert text.count("time to solution scaling, workers") == sum(
        c["mode"] == "time_to_solution" for c in mlperf
    )
    # summary and predict print the same kind for the same series
    rows = _json("summary", "--store", every_round)
    assert {r["scaling"] for r in rows if r["scaling"]} == {c["mode"] for c in mlperf}
    predicted = _json("predict", "--store", every_round)
    assert {s["series"]: s["mode"] for s in predicted} == {c["label"]: c["mode"] for c in mlperf}


def _olympic_minutes(times: list[float]) -> float:
    """MLPerf's olympic mean of BERT's 10 runs: the best and the worst dropped, the rest averaged."""
    kept = sorted(times)[1:-1]
    return statistics.fmean(kept) / 60


def test_a_submissions_score_keeps_its_verdict_whatever_else_is_in_the_store(
    every_round: Path, tmp_path: Path
) -> None:
    """NVIDIA's v2.0 BERT on 64 A100s is one point of a series whose batch is chosen per scale (448 at 8, 3,072 at
    64, ...): alone in a store its official score is supported; beside the vendor's other scales it was "not
    quotable: HS111". It is the same number with the same verdict in both."""
    times = scaling_series(SCALING)["NVIDIA bert"][64]
    claims = tmp_path / "claims.toml"
    claims.write_text(
        'version = 1\n[[claim]]\nid = "bert-64"\nsays = "BERT trains in the official score on 64 A100s"\n'
        'measure = "mlperf_score"\nruns = "source=mlperf,model=bert,workers=64,system=dgxa100_n8_ngc22.04_pytorch"\n'
        f'relation = "about"\nvalue = {_olympic_minutes(times):.4f}\nunit = "min"\ntolerance = "0.5%"\n'
    )
    alone = tmp_path / "alone.duckdb"
    assert cli("ingest", NVIDIA_BERT_64, "--store", alone).returncode == 0
    verdicts = []
    for store in (alone, every_round):
        got = cli("claims", "check", claims, "--store", store, "-f", "json")
        (claim,) = json.loads(got.stdout)["claims"]
        verdicts.append(
            (got.returncode, claim["verdict"], claim["number"]["value"], claim["number"]["rules"]["error"])
        )
    assert verdicts[0] == verdicts[1] == (0, "supported", pytest.approx(verdicts[0][2]), []), verdicts
    # and the point's speedup over the series' base case is judged as any series' ratio: no HS111 beside it
    model = _json("report", "--store", every_round)
    (bert,) = [
        c
        for c in model["comparisons"]
        if c["kind"] == "scaling" and "PyTorch NVIDIA Release 22.04" in c["label"]
    ]
    at64 = next(p for p in bert["points"] if p["workers"] == 64)
    assert at64["speedup"] is not None and "HS111" not in at64["ratio_lint"]["error"]


def test_the_v07_example_stays_not_quotable_for_hs209_alone(tmp_path: Path) -> None:
    dell = DATA / "mlperf-training-v1x" / "v3.1" / "Dell" / "results" / "2xXE8640x4H100-SXM-80GB" / "resnet"
    store = tmp_path / "s.duckdb"
    assert (
        cli("ingest", data_root("mlperf-training-v1x") and dell, V07_NVIDIA, "--store", store).returncode == 0
    )
    got = cli("claims", "check", REPO / "examples" / "claims" / "mlperf.toml", "--store", store, "-f", "json")
    claims = {c["id"]: c for c in json.loads(got.stdout)["claims"]}
    superlinear = claims["dgx-superlinear"]
    assert superlinear["verdict"] == "not quotable" and superlinear["number"]["rules"]["error"] == ["HS209"]
    assert claims["dell-resnet-as-scored"]["verdict"] == "supported"


def test_an_mlperf_speedup_applies_scaling_json_as_the_score_does(tmp_path: Path) -> None:
    """Google's GPT-3 on 512 TPU v5p chips (v4.0) and on 1,024 Trillium chips (v4.1, scaling.json 1.0174): the
    speedup is the ratio of the official scores, each as mlperf-logging's summarizer computes it (it was the ratio
    of the olympic means, 2.31x where the scores give 2.27x)."""
    v5p = (
        data_root("mlperf-training-v1x")
        / "v4.0"
        / "Google"
        / "results"
        / "cloud-tpu-v5p-1024-maxtext"
        / "gpt3"
    )
    trillium = (
        data_root("mlperf-training-v06-v5x")
        / "v4.1"
        / "Google"
        / "results"
        / "cloud-tpu-trillium-1024-maxtext"
    ) / "gpt3"
    store = tmp_path / "s.duckdb"
    assert cli("ingest", v5p, trillium, "--store", store).returncode == 0
    (series,) = [c for c in _json("report", "--store", store)["comparisons"] if c["kind"] == "scaling"]
    (base_min, _, _), (top_min, factor, _) = official_score(v5p), official_score(trillium)
    assert base_min is not None and top_min is not None and factor is not None and factor != 1.0
    top = next(p for p in series["points"] if p["workers"] == 1024)
    assert top["speedup"] == pytest.approx(base_min / top_min, rel=1e-6)
    assert series["metric"].startswith("MLPerf official score")


def test_a_score_from_fewer_runs_than_the_round_asks_keeps_its_verdict_with_a_note(tmp_path: Path) -> None:
    """Four of Dell's five v3.1 ResNet result files (the round asks 5): the score is the olympic mean of the four
    times scaling.json's factor, with the note beside it."""
    source = data_root("mlperf-training-v1x") / "v3.1" / "Dell"
    folder = tmp_path / "v3.1" / "Dell"
    (folder / "systems").mkdir(parents=True)
    shutil.copy(source / "systems" / "2xXE8640x4H100-SXM-80GB.json", folder / "systems")
    results = folder / "results" / "2xXE8640x4H100-SXM-80GB" / "resnet"
    results.mkdir(parents=True)
    for name in ("result_0.txt", "result_1.txt", "result_2.txt", "result_3.txt", "scaling.json"):
        shutil.copy(source / "results" / "2xXE8640x4H100-SXM-80GB" / "resnet" / name, results)
    seconds = sorted(reference(results / f"result_{i}.txt")["seconds"] for i in range(4))
    factor = json.loads((results / "scaling.json").read_text())["scaling_factor"]
    score_min = statistics.fmean(seconds[1:-1]) * factor / 60
    store = tmp_path / "s.duckdb"
    assert cli("ingest", tmp_path / "v3.1", "--store", store).returncode == 0
    claims = tmp_path / "c.toml"
    claims.write_text('version = 1\n[[claim]]\nid = "d"\nsays = "Dell trains ResNet in this time"\n'
                      'measure = "mlperf_score"\nruns = "source=mlperf,model=resnet"\nrelation = "about"\n'
                      f'value = {score_min:.5f}\nunit = "min"\ntolerance = "0.1%"\n')  # fmt: skip
    (claim,) = json.loads(cli("claims", "check", claims, "--store", store, "-f", "json").stdout)["claims"]
    assert claim["verdict"] == "supported", claim
    assert "n = 4: the round's rules ask 5 result files of a submission" in claim["evidence"]
