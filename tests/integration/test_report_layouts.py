"""The report's "Parallel layouts" section: one model's layouts at one worker count, its numbers recomputed here.

A store is built in process from real event files (the contract's EventWriter, every rank writing its steps with
its replica's tokens) for four layouts at 2 workers, 6 repetitions each: dp2, tp2, pp2 under 1F1B and pp2 under
interleaved 1F1B. The times to the target, tokens/s, MFU (against a declared peak), step shares and the pipeline
bubble are computed here from what was written, and the ordering sentence is checked against the decision rule.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from statistics import harmonic_mean, median
from typing import Any

import pytest

from honestscale.analysis.points import lint_codes
from honestscale.analysis.stats import MIN_INTERVAL_RUNS, differ, median_ci
from honestscale.collector._sources import discover
from honestscale.collector.ingest import Ingester
from honestscale.events import EventWriter
from honestscale.report import analyse, report
from honestscale.store import open_store
from honestscale.view import View
from honestscale.view import build as build_view
from tests.conftest import cli

T0 = 1_750_000_000.0
SEQ, BATCH, STEPS = 64, 32, 12
SHAPE = {"layers": 4, "hidden": 128, "heads": 4, "head_dim": 32}
PARAMS, EMBEDDING = 1_000_000, 200_000
PEAK = {"tflops": 0.5, "dtype": "fp32", "source": "a measured peak, for this test"}
# layout name -> run_start fields, times to the target and step seconds per repetition, step shares
LAYOUTS: dict[str, dict[str, Any]] = {
    "dp2": {"start": {"parallel": {"dp": 2}, "comm_dimensions": ["dp"]},
            "tta": [100, 101, 102, 103, 104, 105], "step": [0.10, 0.11, 0.10, 0.12, 0.10, 0.11], "comm": 0.2},
    "tp2": {"start": {"parallel": {"tp": 2}, "comm_dimensions": []}, "peak": False,
            "tta": [200, 210, 205, 220, 215, 207], "step": [0.20, 0.21, 0.22, 0.20, 0.21, 0.23], "comm": None},
    "pp2 (1f1b, 4 microbatches)": {
        "start": {"parallel": {"pp": 2}, "comm_dimensions": ["pp"], "pipeline_schedule": "1f1b", "microbatches": 4,
                  "pipeline_virtual_stages": 1},
        "tta": [130, 131, 129, 135, 133, 132], "step": [0.13, 0.14, 0.13, 0.15, 0.13, 0.14], "comm": 0.3},
    "pp2 (interleaved-1f1b, 4 microbatches, 2 virtual stages)": {
        "start": {"parallel": {"pp": 2}, "comm_dimensions": ["pp"], "pipeline_schedule": "interleaved-1f1b",
                  "microbatches": 4, "pipeline_virtual_stages": 2},
        "tta": [101, 106, 102, 104, 100, 105], "step": [0.10, 0.10, 0.11, 0.10, 0.12, 0.10], "comm": 0.25},
}  # fmt: skip


def _start(campaign: str, layout: dict[str, Any], rep: int, run_id: str) -> dict[str, Any]:
    start = {
        "campaign": campaign, "framework": "torch", "framework_version": "2.5.0", "launcher": "torchrun",
        "backend": "gloo", "cpu": "AMD EPYC 7742 64-Core Processor", "model": "gpt", "dataset": "cpython-stdlib",
        "world_size": 2, "nodes": 1, "accelerators_per_node": 0, "global_batch_size": BATCH,
        "local_batch_size": BATCH, "sequence_length": SEQ, "global_batch_tokens": BATCH * SEQ,
        "precision": "fp32", "compute_dtype": "fp32", "activation_checkpointing": "none",
        "params_total": PARAMS, "params_embedding": EMBEDDING, "model_shape": SHAPE,
        "optimizer": "adamw", "learning_rate": 0.001, "stop_criterion": "target_accuracy", "stop_value": 2.9,
        "target_metric": "loss", "scope": "end_to_end", "scaling": "strong", "purpose": "final", "seed": rep,
        "config_hash": f"{campaign}-{run_id.rsplit('-r', 1)[0]}", **layout["start"],
    }  # fmt: skip
    if layout.get("peak", True):  # True: PEAK; a dict: that peak; False: none
        start["declared_peak"] = PEAK if layout.get("peak", True) is True else layout["peak"]
    return start


def _id(campaign: str, name: str, rep: int) -> str:
    return f"{campaign}-{name.split()[0]}-{'i' if 'interleaved' in name else 'p'}-r{rep}"


def _write(out: Path, campaign: str, name: str, layout: dict[str, Any], rep: int, t0: float) -> str:
    run_id = _id(campaign, name, rep)
    start = _start(campaign, layout, rep, run_id)
    degrees = start["parallel"]
    replicas = 2 // (degrees.get("tp", 1) * degrees.get("pp", 1))
    tta, step_s, comm = float(layout["tta"][rep]), float(layout["step"][rep]), layout["comm"]
    for rank in range(2):
        clock = [t0]
        w = EventWriter(out, run_id, rank, clock=lambda clock=clock: clock[0])
        w.run_start(**start)
        for i in range(STEPS):
            clock[0] = t0 + 1 + i * step_s
            parts: dict[str, Any] = {"t_data": 0.05 * step_s, "t_optimizer": 0.05 * step_s}
            if comm is None:  # the collectives inside compute (tensor parallel): no t_comm
                parts |= {"t_compute": 0.9 * step_s, "comm_measured": False}
            else:
                parts |= {"t_compute": (0.9 - comm) * step_s, "t_comm": comm * step_s, "comm_measured": True}
            w.step(epoch=0, step=i, samples=BATCH // replicas, tokens=BATCH // replicas * SEQ, t_total=step_s,
                   warmup=i < 2, **parts)  # fmt: skip
        if rank == 0:
            clock[0] = t0 + tta / 2
            w.eval(split="validation", metric="loss", value=3.4, epoch=0)
            clock[0] = t0 + tta
            w.eval(split="validation", metric="loss", value=2.85, epoch=1)
            w.eval(split="test", metric="loss", value=2.86, epoch=1)
        clock[0] = t0 + tta + 1.0
        w.run_stop("success")
        w.close()
    return run_id


def _store(tmp: Path, layouts: dict[str, dict[str, Any]], campaign: str) -> View:
    out, t0 = tmp / "events", T0
    for name, layout in layouts.items():
        for rep in range(6):
            _write(out, campaign, name, layout, rep, t0)
            t0 += 1000
    con = open_store(tmp / "store.duckdb")
    try:
        Ingester(con).ingest(discover([str(out)]).sources)
        return build_view(con, campaign)
    finally:
        con.close()


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> tuple[View, Path]:
    tmp = tmp_path_factory.mktemp("layouts")
    return _store(tmp, LAYOUTS, "gpt-layouts"), tmp


def _section(view: View) -> dict[str, Any]:
    model, _ = analyse(view, "gpt-layouts")
    (c,) = [c for c in model.as_json()["comparisons"] if c["kind"] == "layout"]
    assert c["layouts"] is not None
    return dict(c["layouts"])


def test_layout_numbers_are_recomputed_from_the_events(layouts: tuple[View, Path]) -> None:
    view, _ = layouts
    got = _section(view)
    rows = {r["layout"]: r for r in got["rows"]}
    assert list(rows) == ["dp2", "pp2 (1f1b, 4 microbatches)",
                          "pp2 (interleaved-1f1b, 4 microbatches, 2 virtual stages)", "tp2"]  # fmt: skip
    assert got["metric"] == "time to accuracy" and got["target"] == "loss ≤ 2.9"
    flops_per_token = 6 * (PARAMS - EMBEDDING) + 12 * SHAPE["layers"] * SHAPE["hidden"] * SEQ  # palm
    for name, spec in LAYOUTS.items():
        r = rows[name]
        assert r["point"]["succeeded"] == r["point"]["runs"] == 6
        # time to the target: the median of runs, with its order-statistic interval (6 runs: one exists)
        assert r["time_s"] == pytest.approx(median(spec["tta"]))
        assert MIN_INTERVAL_RUNS <= 6
        assert r["time_ci"] == pytest.approx(list(median_ci([float(t) for t in spec["tta"]])))
        assert r["time_to_train_s"] == pytest.approx(median(t + 1 for t in spec["tta"]))
        # tokens/s: every rank's tokens, each replica's once, over the steps after warm-up; harmonic mean of runs
        rates = [BATCH * SEQ / s for s in spec["step"]]
        assert r["point"]["tokens_per_s"] == pytest.approx(harmonic_mean(rates), rel=1e-5, abs=2e-6)
        assert r["point"]["tokens_per_worker"] == pytest.approx(harmonic_mean(rates) / 2, rel=1e-5, abs=2e-6)
        # MFU against the run's declared peak (CPU runs: the table has none), the median of runs
        if spec.get("peak", True):
            mfus = [rate / 2 * flops_per_token / 1e12 / PEAK["tflops"] for rate in rates]
            assert r["mfu"] == pytest.approx(median(mfus), rel=1e-5, abs=2e-6)
            assert r["mfu_ci"] == pytest.approx(list(median_ci(mfus)), rel=1e-5, abs=2e-6)
        else:
            assert r["mfu"] is None and "CPU run" in r["mfu_missing"] and "declared_peak" in r["mfu_record"]
        # the step: median of the runs' shares; comm labelled by what it holds
        shares = r["point"]["breakdown"]
        assert shares["data"] == pytest.approx(0.05, abs=1e-5)
        assert shares["optimizer"] == pytest.approx(0.05, abs=1e-5)
        if spec["comm"] is None:
            assert r["point"]["comm"] != "measured" and r["comm_holds"] == []
            assert r["inside_compute"] == ["tp all-reduce"]
            assert shares["compute"] == pytest.approx(0.9, abs=1e-5)
        else:
            assert r["point"]["comm"] == "measured"
            assert shares["comm"] == pytest.approx(spec["comm"], abs=1e-5)
    assert rows["dp2"]["comm_holds"] == ["dp all-reduce"] and rows["dp2"]["pipeline"] is None
    # the analytic bubble: (pp - 1) / (m + pp - 1) for 1F1B, (pp - 1) / (v m + pp - 1) interleaved
    assert rows["pp2 (1f1b, 4 microbatches)"]["pipeline"]["bubble"] == pytest.approx(1 / 5)
    inter = rows["pp2 (interleaved-1f1b, 4 microbatches, 2 virtual stages)"]
    assert inter["pipeline"]["bubble"] == pytest.approx(1 / 9)
    assert inter["comm_holds"] == ["pp send/recv + bubble"]


def test_each_row_carries_the_verdicts_of_exactly_its_runs(layouts: tuple[View, Path]) -> None:
    view, _ = layouts
    model, result = analyse(view, "gpt-layouts")
    findings = [f.as_json() for f in result.findings]
    (c,) = [c for c in model.comparisons if c.kind == "layout"]
    assert c.layouts is not None
    for row in c.layouts.rows:
        ids = set(row.point.run_ids)
        assert ids == {_id("gpt-layouts", row.layout, k) for k in range(6)}
        assert row.point.lint == lint_codes(findings, ids)


def test_the_ordering_obeys_the_decision_rule(layouts: tuple[View, Path]) -> None:
    view, tmp = layouts
    got = _section(view)
    assert got["fastest"] == "dp2"
    ref = [float(t) for t in LAYOUTS["dp2"]["tta"]]
    verdicts = {o["a"]: o["verdict"] for o in got["orderings"]}
    for name, spec in LAYOUTS.items():
        if name != "dp2":
            assert verdicts[name] == differ([float(t) for t in spec["tta"]], ref).verdict
    # tp2 and 1F1B are slower beyond doubt; interleaved overlaps dp2: no ordering is claimed
    assert verdicts["tp2"] == verdicts["pp2 (1f1b, 4 microbatches)"] == "differ"
    assert verdicts["pp2 (interleaved-1f1b, 4 microbatches, 2 virtual stages)"] != "differ"
    assert got["fastest_shown"] is False
    html = tmp / "r.html"
    report(view, pdf=tmp / "r.pdf", html=html, campaign="gpt-layouts")
    page = html.read_text()
    assert "Parallel layouts" in page and "no ordering between them is claimed" in page
    assert "reaches the target fastest" not in page
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", "-layout", str(tmp / "r.pdf"), "-"], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        assert "Parallel layouts" in text and "analytic" in text and "20 %" in text and "11 %" in text


def test_no_section_without_two_layouts(tmp_path: Path) -> None:
    view = _store(tmp_path, {"dp2": LAYOUTS["dp2"]}, "plain")
    assert not view.of_kind("layout")
    model, _ = analyse(view, "plain")
    assert not [c for c in model.comparisons if c.kind == "layout"]
    html = tmp_path / "r.html"
    report(view, pdf=None, html=html, campaign="plain")
    page = html.read_text()
    assert "Parallel layouts" not in page and 'id="layouts"' not in page


def test_an_mfu_over_100_percent_fails_as_an_error_and_is_never_quoted(tmp_path: Path) -> None:
    """A declared peak far below what the counts reach (a CPU's peak mistyped 1,000 x too small) gives an MFU over
    100 %: HS107 fails as an error on exactly those runs (lint exits 1), and that layout's MFU is marked "do not
    quote" in the report (HTML) and in summary's table and JSON; the other layout's MFU is not."""
    low = {"tflops": 0.0005, "dtype": "fp32", "source": "PEAK mistyped 1,000 x too small, for this test"}
    spec = {
        "dp2": {**LAYOUTS["dp2"], "peak": low},
        "pp2 (1f1b, 4 microbatches)": LAYOUTS["pp2 (1f1b, 4 microbatches)"],
    }
    view = _store(tmp_path, spec, "impossible")
    model, result = analyse(view, "impossible")
    errors = [f for f in result.findings if f.code == "HS107" and f.severity == "error"]
    assert errors and all("do not quote" in f.message and "is over 100 %" in f.message for f in errors)
    assert {r for f in errors for r in f.runs} == {_id("impossible", "dp2", k) for k in range(6)}
    (c,) = [c for c in model.comparisons if c.kind == "layout"]
    assert c.layouts is not None
    flags = {row.layout: row.mfu_flag for row in c.layouts.rows}
    assert flags == {"dp2": "do not quote", "pp2 (1f1b, 4 microbatches)": ""}, flags
    html = tmp_path / "r.html"
    report(view, pdf=None, html=html, campaign="impossible")
    cell = next(
        row for row in html.read_text().split("<tr>") if row.startswith("<td>dp2</td>") and " %" in row
    )
    assert "do not quote" in cell
    linted = cli("lint", "--store", tmp_path / "store.duckdb", "--campaign", "impossible")
    assert linted.returncode == 1 and "do not quote" in linted.stdout, linted.stdout
    # summary's table has the MFU column its JSON has, the impossible one marked in both
    table = cli("summary", "--store", tmp_path / "store.duckdb", "--campaign", "impossible").stdout
    cells = re.findall(r"│([^│\n]*)", table)  # the table's cells, line by line (rich wraps a long cell)
    assert "MFU" in table and any("do not" in c for c in cells) and any("quote" in c for c in cells), table
    rows = json.loads(
        cli("summary", "--store", tmp_path / "store.duckdb", "--campaign", "impossible", "-f", "json").stdout
    )
    marked = {(r["layout"] or "data parallel"): r["mfu"]["do_not_quote"] for r in rows if r["mfu"]}
    assert marked and any(marked.values()) and not all(marked.values()), marked
