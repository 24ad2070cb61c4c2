"""Energy to train and to accuracy from NVML readings, and statistical vs hardware efficiency (issue 17).

The runs are written as real event files by the contract's EventWriter and ingested by the collector; the
numbers they must give are known from how they were written: an accelerator whose power follows a known curve
has a known energy counter, and a run whose samples and times are set has known factors.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from honestscale.analysis import efficiency, energy
from honestscale.collector import Ingester, discover
from honestscale.event_records import SystemFields
from honestscale.events import EventWriter
from honestscale.store import open_store
from honestscale.view import build
from tests.conftest import cli
from tests.lint_campaigns import T0, view_of
from tests.tools import require


def _watts(t: float) -> float:
    """A GPU's power over a run: ramps up, then oscillates with the steps (seconds since start)."""
    return 120.0 + 180.0 * (1 - math.exp(-t / 3.0)) + 40.0 * math.sin(t / 2.0)


def _joules(t: float) -> float:
    """The exact integral of _watts from 0 to t (what an energy counter that never drops a reading holds)."""
    return 300.0 * t - 540.0 * (1 - math.exp(-t / 3.0)) + 80.0 * (1 - math.cos(t / 2.0))


def _gpu_run(out: Path, run_id: str, *, seconds: float, counter: bool = True, power: bool = True,
             reset_at: float | None = None, ranks: int = 1, first: float = 0.73) -> None:  # fmt: skip
    """A run whose sampler read NVML every second (first reading ``first`` s after run_start, none at the end)."""
    for rank in range(ranks):
        clock = [T0]
        w = EventWriter(out, run_id, rank, clock=lambda clock=clock: clock[0])
        if rank == 0:
            w.run_start(campaign="gpu", name=run_id, purpose="final", framework="torch", world_size=ranks, nodes=1,
                        accelerators_per_node=ranks, accelerator="NVIDIA H100 80GB HBM3", model="resnet50",
                        dataset="imagenet", global_batch_size=256, stop_criterion="target_accuracy",
                        stop_value=0.75, target_metric="top1_accuracy", scaling="strong")  # fmt: skip
        t = first
        while t < seconds - 0.2:
            clock[0] = T0 + t
            fields: SystemFields = {"device": rank}
            if power:
                fields["power_w"] = _watts(t)
            if counter:
                base = 5.0e6 + rank * 1e5  # the counter counts since the driver loaded, not since the run
                fields["energy_j"] = (
                    base + _joules(t) if reset_at is None or t < reset_at else _joules(t) - _joules(reset_at)
                )
            w.system(**fields)
            t += 1.0
        clock[0] = T0 + seconds * 0.8
        if rank == 0:
            w.eval(split="validation", metric="top1_accuracy", value=0.76, epoch=3)
        clock[0] = T0 + seconds
        w.run_stop("success")
        w.close()


def _view(tmp_path: Path, out: Path) -> dict[str, object]:
    con = open_store(tmp_path / "s.duckdb")
    try:
        Ingester(con).ingest(discover([str(out)]).sources)
        return {r.id: r for r in build(con).runs}
    finally:
        con.close()


def test_energy_to_train_equals_the_counter_difference_and_to_accuracy_stops_at_the_target(
    tmp_path: Path,
) -> None:
    out = tmp_path / "events"
    _gpu_run(out, "gpu-a", seconds=61.4)
    _gpu_run(out, "gpu-two", seconds=61.4, ranks=2)
    _gpu_run(out, "power-only", seconds=61.4, counter=False)
    _gpu_run(out, "reset", seconds=61.4, reset_at=30.2)
    _gpu_run(out, "cpu", seconds=61.4, counter=False, power=False)
    _gpu_run(out, "partial", seconds=61.4, ranks=2)
    (out / "partial" / "events-rank1.jsonl").write_text(  # rank 1's sampler read nothing: drop its readings
        "".join(line for line in (out / "partial" / "events-rank1.jsonl").read_text().splitlines(keepends=True)
                if '"system"' not in line)
    )  # fmt: skip
    runs = _view(tmp_path, out)
    truth = _joules(61.4) - _joules(0.0)
    got = energy.to_train(runs["gpu-a"])  # type: ignore[arg-type]
    assert got is not None and got.source == energy.COUNTER and got.devices == 1
    assert got.joules == pytest.approx(truth, rel=0.02)
    two = energy.to_train(runs["gpu-two"])  # type: ignore[arg-type]
    assert two is not None and two.joules == pytest.approx(2 * truth, rel=0.02)
    assert [rank for rank, _ in two.per_rank] == [0, 1] and two.per_rank[0][1] == pytest.approx(
        truth, rel=0.02
    )
    to_acc = energy.to_accuracy(runs["gpu-a"])  # type: ignore[arg-type]
    assert to_acc is not None and to_acc.joules == pytest.approx(_joules(61.4 * 0.8), rel=0.02)
    only_power = energy.to_train(runs["power-only"])  # type: ignore[arg-type]
    assert only_power is not None and only_power.source == energy.POWER
    assert only_power.joules == pytest.approx(truth, rel=0.02)
    reset = energy.to_train(runs["reset"])  # type: ignore[arg-type]
    assert reset is not None and reset.source == energy.POWER  # a counter that went backwards is not trusted
    assert energy.to_train(runs["cpu"]) is None  # type: ignore[arg-type]
    assert energy.to_train(runs["partial"]) is None  # type: ignore[arg-type]  # 1 of 2 ranks: not half the energy
    assert energy.source([runs["cpu"]]) == energy.NOT_RECORDED  # type: ignore[list-item]
    assert energy.mean_power_w(runs["gpu-a"]) == pytest.approx(truth / 61.4, rel=0.02)  # type: ignore[arg-type]


def test_the_report_prints_energy_where_measured_and_says_not_recorded_elsewhere(tmp_path: Path) -> None:
    out = tmp_path / "events"
    for rep in range(3):
        _gpu_run(out, f"gpu-r{rep}", seconds=40.0 + rep)
        _gpu_run(out, f"cpu-r{rep}", seconds=40.0 + rep, counter=False, power=False)
    store = tmp_path / "s.duckdb"
    assert cli("ingest", out, "--store", store).returncode == 0
    got = cli("report", "--store", store, "--campaign", "gpu", "-f", "json")
    assert got.returncode == 0, got.stderr
    model = json.loads(got.stdout)
    truth = sum(_joules(40.0 + rep) for rep in range(3))
    assert model["totals"]["energy_runs"] == 3 and model["totals"]["runs"] == 6
    assert model["totals"]["kwh"] == pytest.approx(truth / 3.6e6, rel=0.02)
    energies = {r["run_id"]: r["energy_j"] for r in model["runs"]}
    assert energies["gpu-r1"] == pytest.approx(_joules(41.0), rel=0.02) and energies["cpu-r1"] is None
    shown = json.loads(cli("show", "gpu-r2", "--store", store, "-f", "json").stdout)["energy_to_train"]
    assert shown["source"] == energy.COUNTER and shown["joules"] == pytest.approx(_joules(42.0), rel=0.02)
    assert shown["mean_power_w"] == pytest.approx(_joules(42.0) / 42.0, rel=0.02) and list(
        shown["per_rank_joules"]
    ) == ["0"]
    assert json.loads(cli("show", "cpu-r2", "--store", store, "-f", "json").stdout)["energy_to_train"] == {
        "source": "not recorded"
    }
    assert "not recorded" in cli("show", "cpu-r2", "--store", store).stdout
    require(shutil.which("pdftotext"), "poppler-utils (pdftotext)", "apt-get install poppler-utils")
    pdf = tmp_path / "r.pdf"
    assert cli("report", "--store", store, "--campaign", "gpu", "-o", pdf).returncode == 0
    text = " ".join(unicodedata.normalize("NFKC", subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True,
                                                                  text=True, check=True).stdout).split())  # fmt: skip
    assert f"{truth / 3.6e6:.3f} kWh of measured energy (3 of 6 runs measured" in text
    assert "not counted as 0" in text


def test_statistical_and_hardware_factors_multiply_back_to_the_time_ratio(tmp_path: Path) -> None:
    # 2 workers: each sample 1.8x faster, 1.3x the samples (20 -> 26 steps of 1,024); times vary per repetition
    base = [1000.0, 1040.0, 980.0, 1010.0, 995.0, 1025.0]
    scaled = [t * 1.3 / 1.8 for t in (1000.0, 990.0, 1030.0, 1005.0, 1015.0, 985.0)]
    case = {"runs": [
        {"id": "base", "workers": 1, "steps": 20, "ttt_by_rep": base, "evals": []},
        {"id": "big", "workers": 2, "steps": 26, "ttt_by_rep": scaled, "evals": []},
    ]}  # fmt: skip
    view = view_of(tmp_path, case)
    series = next(c for c in view.comparisons if c.kind == "scaling")
    rows = efficiency.factors(series.by_workers())
    assert [f.workers for f in rows] == [1, 2]
    assert rows[0].samples == 20 * 1024 and rows[1].samples == 26 * 1024
    two = rows[1]
    assert two.statistical is not None and two.statistical.value == pytest.approx(1.3)
    assert two.hardware is not None and two.time_speedup is not None
    ratio = sorted(base)[2:4]  # medians of the times: they carry the 1.8 and 1.3 of the construction
    assert two.hardware.value == pytest.approx(
        (sum(ratio) / 2) / (20 * 1024) / ((sum(sorted(scaled)[2:4]) / 2) / (26 * 1024)), rel=1e-9
    )
    assert two.hardware.value / two.statistical.value == pytest.approx(two.time_speedup.value, rel=1e-9)
    assert "needed 1.30x the samples (factor 1.30, 95 % CI 1.30-1.30)" in two.sentence()
