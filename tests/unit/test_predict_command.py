"""`honestscale predict` in process on event files written by the contract's writer: a strong-scaling series whose
step time follows a known law, and the same series with its batch changed irregularly with the workers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from honestscale import events as ev
from tests.conftest import cli

WORKERS = (1, 2, 4, 8)
STEPS = 12


def _step_s(workers: int) -> float:
    return 0.02 + 0.16 / workers  # Amdahl: a serial 20 ms and a parallel 160 ms


def _comm_s(workers: int) -> float:
    return 0.0 if workers == 1 else 0.002 * math.log2(workers)


def _write(folder: Path, batches: dict[int, int]) -> None:
    rng = np.random.default_rng(3)
    now = [1000.0]  # the events' clock (EventWriter(clock=...)), moved on by each step
    for w in WORKERS:
        for rep in range(6):
            step = _step_s(w) * math.exp(rng.normal(0, 0.01))
            for rank in range(w):
                now[0] = 1000.0
                with ev.EventWriter(folder, f"w{w}-r{rep}", rank, clock=lambda: now[0]) as out:
                    out.run_start(framework="torch", world_size=w, nodes=1, accelerators_per_node=0,
                                  global_batch_size=batches[w], local_batch_size=batches[w] // w, campaign="amdahl",
                                  model="mlp", dataset="digits", seed=rep)  # fmt: skip
                    for i in range(STEPS):
                        now[0] += step
                        out.step(epoch=0, step=i, samples=batches[w] // w, t_total=step, t_data=0.001,
                                 t_compute=step - 0.003 - _comm_s(w), t_comm=_comm_s(w), t_optimizer=0.002, comm_measured=w > 1)  # fmt: skip
                    if rank == 0:  # the quality reached, at every scale alike (HS101: accuracy not ignored)
                        out.eval(split="validation", metric="accuracy", value=0.9, epoch=0)
                    out.run_stop("success")


def _predict(tmp_path: Path, batches: dict[int, int]) -> dict[str, Any]:
    _write(tmp_path / "events", batches)
    store = tmp_path / "s.duckdb"
    assert cli("ingest", tmp_path / "events", "--store", store).returncode == 0
    got = cli("predict", "--store", store, "--at", "16", "-f", "json")
    assert got.returncode == 0, got.stderr
    (series,) = json.loads(got.stdout)
    return series  # type: ignore[no-any-return]


def test_a_strong_series_predicts_every_measure_and_holds_the_law_it_follows(tmp_path: Path) -> None:
    s = _predict(tmp_path, dict.fromkeys(WORKERS, 64))
    got = {p["measure"]: p for p in s["predictions"]}
    assert s["mode"] == "strong" and set(got) == {"time", "step_time", "throughput", "comm_share"}
    step = got["step_time"]
    assert step["statistic"] == "median of runs" and step["unit"] == "s"
    assert step["value"] == pytest.approx(_step_s(16), rel=0.05)
    assert step["low"] <= _step_s(16) <= step["high"]
    assert got["throughput"]["statistic"] == "harmonic mean of runs"
    assert got["throughput"]["value"] == pytest.approx(64 / _step_s(16), rel=0.1)
    assert 0 < got["comm_share"]["value"] <= 1 and got["comm_share"]["high"] <= 1
    # a single worker communicates nothing: the share is modelled from 2, 4 and 8, too few to quote or to check
    assert not got["comm_share"]["quote"] and any("fitted to 3" in r for r in got["comm_share"]["reasons"])
    for name in (
        "time",
        "step_time",
        "throughput",
    ):  # four counts, twice the largest: quotable unless a rule fails
        assert got[name]["quote"] and not s["lint"]["error"], got[name]["reasons"]
    assert set(s["checks"]) == {"time", "step_time", "throughput"}, "checked on the series' own largest count"
    assert s["checks"]["step_time"]["at"] == 8


def test_a_batch_that_follows_neither_scaling_refuses_step_time_and_throughput(tmp_path: Path) -> None:
    s = _predict(tmp_path, {1: 64, 2: 64, 4: 256, 8: 320})
    assert s["mode"] == "mixed"
    assert set(s["refused"]) == {"step_time", "throughput"}
    assert all("neither strong nor weak" in why for why in s["refused"].values())
    (time,) = [p for p in s["predictions"] if p["measure"] == "time"]
    assert any("changes its batch with the workers" in r for r in time["reasons"])
    assert all(p["measure"] in ("time", "comm_share") for p in s["predictions"])
