"""Decisions of the judges that mutation testing (scripts/mutation) found no test pinning, each pinned by a value
worked out by hand or by construction."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from honestscale.analysis import ranks
from honestscale.analysis.efficiency import Factors
from honestscale.analysis.stats import Estimate
from honestscale.analysis.steady import mser5
from honestscale.view import EnergyRecord, Run

RNG = np.random.default_rng(78)


def test_the_inverse_of_a_ratio_swaps_and_inverts_its_interval() -> None:
    got = Estimate(2.0, 1.6, 2.5).inverse()
    assert (got.value, got.low, got.high) == (0.5, 0.4, 0.625)
    assert Estimate(4.0).inverse() == Estimate(0.25)


def _factors(hardware: float, statistical: float, speedup: float) -> Factors:
    return Factors(8, 1, 6, 0.01, (None, None), 1e6, (None, None), Estimate(hardware), Estimate(statistical),
                   Estimate(speedup))  # fmt: skip


def test_a_factor_below_one_is_said_as_slower_by_its_inverse() -> None:
    said = _factors(0.5, 0.8, 0.625).sentence()
    assert said.startswith("8x the workers made each sample 2.00x slower")
    assert "and needed only 0.80x the samples" in said and "time to accuracy 1.60x slower" in said
    said = _factors(1.25, 1.5, 0.83).sentence()
    assert "each sample 1.25x faster (no interval" in said and "but needed 1.50x the samples" in said


def test_two_rank_runs_are_summarised_with_their_straggler() -> None:
    """A run of 2 ranks has ranks to compare (more than one); rank 1 30 % slower over 40 steps is its straggler,
    its excess over the median of the two ranks' medians 0.13 / 0.115 - 1 = 13 %."""
    times = {0: list(RNG.normal(0.10, 0.002, 40)), 1: list(RNG.normal(0.13, 0.002, 40))}
    spreads = ranks.of_runs({"two": times, "one": {0: list(RNG.normal(0.1, 0.002, 40))}})
    got = ranks.summarise(["two", "one"], spreads)
    assert got["runs"] == 1 and got["differ"] == 1
    (straggler,) = got["stragglers"]
    assert straggler["run_id"] == "two" and straggler["rank"] == 1
    assert straggler["excess"] == pytest.approx(0.13 / 0.115 - 1, abs=0.01)


@pytest.mark.parametrize("seed", range(5))
def test_mser5_finds_the_warm_up_of_noisy_steps(seed: int) -> None:
    """20 steps settling from 3x, then 180 steady steps with 2 % noise: MSER-5's marginal standard error (the sum
    of squares over (k - d)^2) is least just past the warm-up, never at its bound."""
    rng = np.random.default_rng(seed)
    warm = [0.1 * (1 + 2 * (20 - i) / 20) for i in range(20)]
    times = warm + list(0.1 * (1 + 0.02 * rng.standard_normal(180)))
    warmup, why = mser5(times)
    assert warmup is not None and 15 <= warmup <= 30, why


def test_a_difference_of_times_gives_each_side_the_medians_order_statistic_interval() -> None:
    """``differ`` of times: each side's interval is its median's (the 1st and 6th of 6), not a bootstrap's."""
    from honestscale.analysis.stats import differ

    a, b = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0], [20.0, 21.0, 22.0, 23.0, 24.0, 26.0]
    got = differ(a, b, "median")
    assert (got.a_ci, got.b_ci) == ((10.0, 15.0), (20.0, 26.0))
    rates = differ(a, b, "hmean")  # rates: the harmonic mean's bootstrap, inside the range of the runs
    assert rates.a_ci != (10.0, 15.0) and 10.0 < rates.a_ci[0] < rates.a_ci[1] < 15.0  # type: ignore[operator]


@pytest.mark.parametrize(("text", "fraction"), [("5%", 0.05), ("5 %", 0.05), ("0.05", 0.05), ("250%", 2.5)])
def test_a_gates_threshold_reads_as_a_fraction(text: str, fraction: float) -> None:
    from honestscale.compare._gate import parse_threshold

    assert parse_threshold(text, "--fail-slower") == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["five", "5%%", "-1%", "1000%", "nan"])
def test_a_gates_threshold_out_of_range_or_not_a_number_is_refused(text: str) -> None:
    from honestscale.compare._gate import parse_threshold
    from honestscale.errors import HonestscaleError

    with pytest.raises(HonestscaleError, match="--fail-slower"):
        parse_threshold(text, "--fail-slower")


def test_a_measure_of_no_value_is_nan_not_zero() -> None:
    from honestscale.analysis.prediction import Measure
    from honestscale.analysis.stats import RATE_STATISTIC, TIME_STATISTIC

    time = Measure("time", "time to train", "s", TIME_STATISTIC, (0.0, float("inf")), ())
    rate = Measure("throughput", "throughput", "samples/s", RATE_STATISTIC, (0.0, float("inf")), ())
    assert np.isnan(time.centre([])) and np.isnan(rate.centre([]))
    assert time.centre([1.0, 2.0, 9.0]) == 2.0 and rate.centre([1.0, 2.0, 4.0]) == pytest.approx(12 / 7)


def test_a_points_quality_and_rates_are_its_runs_median_and_harmonic_means(tmp_path: Path) -> None:
    """A point of the careful campaign (8 workers, 6 runs of varied accuracy and speed): its accuracy is the median
    of the runs' final values, its throughput their harmonic mean and per worker that over 8, worked out here."""
    import statistics

    from honestscale.analysis.points import point
    from tests.lint_campaigns import view_of

    case = {"runs": [{"id": "base", "workers": 1, "ttt": 28_800.0},
                     {"id": "big", "workers": 8, "reps": 3, "test_acc": 0.750, "step_s_by_rep": [0.40, 0.42, 0.44]},
                     {"id": "big2", "workers": 8, "reps": 3, "test_acc": 0.771, "step_s_by_rep": [0.50, 0.41, 0.43]}]}  # fmt: skip
    view = view_of(tmp_path, case)
    runs = [r for r in view.runs if r.workers == 8]
    got = point(8, runs, view.fractions, mlperf=False)
    finals = [r.final_value for r in runs if r.final_value is not None]
    rates = [r.throughput for r in runs if r.throughput]
    assert len(finals) == len(rates) == 6 and len(set(rates)) > 1 and sorted(set(finals)) == [0.750, 0.771]
    assert got.accuracy == pytest.approx(statistics.median(finals))
    assert got.throughput == pytest.approx(statistics.harmonic_mean(rates))
    assert got.per_worker == pytest.approx(statistics.harmonic_mean(rates) / 8)


def _one_run(tmp_path: Path, **changes: object) -> Run:
    """The careful campaign's base run (1 worker, 28,800 s to train), with ``changes`` made to it."""
    from tests.lint_campaigns import view_of

    view = view_of(tmp_path, {"runs": [{"id": "base", "workers": 1, "ttt": 28_800.0}]})
    (run, *_) = [r for r in view.runs if r.workers == 1]
    return dataclasses.replace(run, **changes)  # type: ignore[arg-type]


def _sacct(job: str, step: str | None, joules: float, start: float, stop: float) -> EnergyRecord:
    return EnergyRecord("slurm-sacct", job, step, "n1", 1, start, stop, joules, "measured (ConsumedEnergyRaw)",
                        "COMPLETED", f"sacct.txt:{2 if step is None else 3}")  # fmt: skip


def test_slurm_energy_is_joined_by_job_and_step_and_only_where_the_run_fills_the_line(tmp_path: Path) -> None:
    """A run of job 41 step 0 takes its step's line (5.0 MJ), not the job's (6.0 MJ); without a step id, the job's;
    a line over 40,000 s that the 28,800 s run fills 72 % of is not the run's energy (it must fill 90 %)."""
    from honestscale.analysis.energy import SLURM, accounted

    base = _one_run(tmp_path)
    t0 = float(base.started_at or 0.0)
    lines = (_sacct("41", None, 6.0e6, t0 - 10, t0 + 28_810), _sacct("41", "0", 5.0e6, t0, t0 + 28_800))
    got, why = accounted(
        dataclasses.replace(base, slurm_job_id="41", slurm_step_id="0", energy_records=lines)
    )
    assert why == "" and got is not None and got.joules == 5.0e6 and got.source == SLURM
    assert got.joined.startswith("joined by Slurm job id (job 41.0's line") and "(sacct.txt:3)" in got.joined
    got, _ = accounted(dataclasses.replace(base, slurm_job_id="41", energy_records=lines))
    assert got is not None and got.joules == 6.0e6 and "(job 41's line" in got.joined
    long = (_sacct("41", None, 6.0e6, t0, t0 + 40_000),)
    got, why = accounted(dataclasses.replace(base, slurm_job_id="41", energy_records=long))
    assert got is None and "6,000,000 J over 40,000.0 s" in why and "fills less than 90% of it" in why
    assert accounted(dataclasses.replace(base, slurm_job_id="42", energy_records=lines)) == (None, "")


def test_a_points_energy_without_accuracy_is_its_energy_to_train(tmp_path: Path) -> None:
    from honestscale.analysis.points import energies

    base = _one_run(tmp_path, energy_to_train_j=7.5e6, evals=())
    assert energies([base]) == ("energy to train", [7.5e6])


def test_every_claim_a_tool_prints_is_read_under_its_own_key(tmp_path: Path) -> None:
    from honestscale.analysis.flops import claims_of

    said = {"mfu": 0.41, "hfu": 0.52, "tflops_per_accelerator": 402.0, "tokens_per_s": 9.1e5,
            "tokens_per_s_per_accelerator": 1.1e5, "peak_tflops": 989.0, "peak_dtype": "bf16",
            "flops_convention": "6N", "params": 7_000_000_000}  # fmt: skip
    base = _one_run(tmp_path)
    got = claims_of(dataclasses.replace(base, attrs={**base.attrs, "claims": said}))
    assert dataclasses.astuple(got) == tuple(said.values())


def test_weak_throughput_is_forecast_with_gustafsons_law_and_strong_times_with_amdahls() -> None:
    from honestscale.analysis.forecast import _measure

    assert _measure("throughput", "time to train", "weak").laws == ("gustafson",)
    assert _measure("throughput", "time to train", "strong").laws == ()
    assert _measure("time", "time to train", "strong").laws == ("amdahl",)
    assert _measure("step_time", "time to train", "strong").laws == ("amdahl",)
    assert _measure("time", "time to train", "weak").laws == ()


def test_a_series_with_a_zero_time_fits_no_model() -> None:
    """A time of 0 has no relative residual: that row of every hypothesis is nan, the other row fitted."""
    from honestscale.analysis import pmnf

    p = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    y = np.array([[100.0, 52.0, 0.0, 15.0, 9.0], [100.0, 52.0, 27.0, 15.0, 9.0]])
    for h in pmnf.hypotheses():
        c0, c1, _ = pmnf.fit_rows(h, p, y)
        assert np.isnan(c0[0]) and np.isnan(c1[0]), h
        assert np.isfinite(c0[1]) or not np.all(np.isfinite(h.basis(p))), h


@pytest.mark.parametrize("name", ["MEDIAN", "mean", "hmean "])
def test_a_statistic_not_computed_is_refused_not_taken_for_the_median(name: str) -> None:
    from honestscale.analysis.stats import differ, ratio

    with pytest.raises(ValueError, match=r"median \(times\) or hmean \(rates\)"):
        differ([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], name)
    with pytest.raises(ValueError, match=r"median \(times\) or hmean \(rates\)"):
        ratio([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], name)


def test_an_mlperf_submissions_score_is_the_result_summarizers(tmp_path: Path) -> None:
    """NVIDIA's two v0.7 ResNet submissions (tests/data/mlperf-v0.7-nvidia, 5 runs each, unpacked as the
    results repository holds them): each lands as one submission of its 5 runs, 1 dropped at each end, scored as
    mlperf-logging's result summarizer scores it."""
    import gzip
    import shutil

    import duckdb

    from honestscale import view as _view
    from honestscale.analysis.mlperf import submissions
    from tests.conftest import REPO, cli
    from tests.mlperf import official_score, reference

    data = REPO / "tests" / "data" / "mlperf-v0.7-nvidia"
    for path in data.rglob("*"):
        if path.is_file() and path.parent != data:
            dest = tmp_path / path.relative_to(data)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".gz":
                dest.with_suffix("").write_bytes(gzip.decompress(path.read_bytes()))
            else:
                shutil.copyfile(path, dest)
    root = tmp_path / "training_results_v0.7"
    store = tmp_path / "s.duckdb"
    assert cli("ingest", root, "--store", store).returncode == 0
    with duckdb.connect(str(store), read_only=True) as con:
        subs = submissions(_view.build(con).runs)
    folders = sorted(p.parent for p in root.rglob("result_0.txt"))
    assert len(folders) == 2 and [s.folder.split("/")[-2:] for s in subs] == [
        list(f.parts[-2:]) for f in folders
    ]
    for sub, folder in zip(subs, folders, strict=True):
        assert len(sub.run_ids) == 5 and len(set(sub.run_ids)) == 5 and sub.drop == 1, sub
        official, _, said = official_score(folder)
        assert official is not None and sub.scaled_s is not None, said
        assert sub.scaled_s / 60 == pytest.approx(official, rel=1e-6)
        failed = sum(reference(p)["status"] != "success" for p in sorted(folder.glob("result_*.txt")))
        assert sum(t is None for t in sub.times_s) == failed
        assert sub.note == "olympic mean of 3 of 5 runs (1 dropped at each end" + (
            f"; {failed} that did not converge among the slowest dropped)" if failed else ")"
        )
