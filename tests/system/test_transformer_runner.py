"""The transformer runner for real: a GPT on the CPython sources under each parallel layout, 2 and 4 ranks over
gloo on the CPU, launched by `honestscale run`, ingested and read back as a user reads it.

What must hold: every layout trains the same model (one seed, one data order: their validation losses agree with
the one-rank run's), the layout lands with the run, and the rates are derived from every rank's counts and the
layout (a tensor or pipeline group processes a token once), recomputed here from the event files themselves.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, hs
from tests.tools import module

module("torch", top=True)

COMMON = ("--model", "gpt", "--epochs", "1", "--batch-size", "32", "--lr", "0.003", "--corpus-bytes", "50000",
          "--sample-interval", "0")  # fmt: skip


def _run(out: Path, run_id: str, parallel: str, workers: int, *extra: str) -> None:
    result = hs("run", "--framework", "torch", "--workers", str(workers), *COMMON, "--parallel", parallel,
                "--run-id", run_id, *extra, "--out", out, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def _events(out: Path, run_id: str) -> dict[int, list[dict[str, Any]]]:
    return {int(p.stem.removeprefix("events-rank")): [json.loads(line) for line in p.open()]
            for p in sorted((out / run_id).glob("events-rank*.jsonl"))}  # fmt: skip


def _tokens_per_s_from_files(events: dict[int, list[dict[str, Any]]], replica_ranks: int) -> float:
    """Tokens/s as the contract defines it, from the files: per synchronous step the slowest rank's time and every
    rank's tokens, each replica's once (divided by the ranks that share a replica), warm-up excluded."""
    time_of: dict[int, float] = defaultdict(float)
    tokens_of: dict[int, int] = defaultdict(int)
    for evs in events.values():
        for e in evs:
            if e["kind"] == "step" and not e.get("warmup"):
                time_of[e["step"]] = max(time_of[e["step"]], e["t_total"])
                tokens_of[e["step"]] += e["tokens"]
    return sum(tokens_of.values()) / replica_ranks / sum(time_of.values())


def _validation_loss(events: dict[int, list[dict[str, Any]]]) -> float:
    (v,) = [e["value"] for e in events[0] if e["kind"] == "eval" and e["split"] == "validation"]
    return float(v)


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """One run per layout (and one rank alone), ingested into one store."""
    root = tmp_path_factory.mktemp("gpt")
    out, store = root / "runs", root / "s.duckdb"
    _run(out, "gpt-1", "ddp", 1)
    for parallel in ("tp", "fsdp", "pp"):
        _run(out, f"gpt-{parallel}", parallel, 2)
    _run(out, "gpt-dp2-pp2", "dp2,pp2", 4, "--pipeline-schedule", "gpipe")
    _run(out, "gpt-dp2-tp2", "dp2,tp2", 4)  # the dp all-reduce of DTensor gradients beside tensor parallelism
    _run(out, "gpt-fsdp2-tp2", "fsdp2,tp2", 4)
    _run(out, "gpt-budget", "ddp", 1, "--max-samples", "320")  # a sample budget, recorded as what stopped it
    assert hs("ingest", out, "--store", store).returncode == 0
    runs = {r["run_id"]: r for r in json.loads(cli("runs", "--store", store, "-f", "json").stdout)}
    return out, runs


def test_every_layout_trains_the_same_model(layouts: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    out, runs = layouts
    assert {r["status"] for r in runs.values()} == {"success"}
    alone = _validation_loss(_events(out, "gpt-1"))
    assert alone < 3.5  # it learned: a byte-level model starts at ln 256 = 5.55 nats
    # One seed, one data order: only the order of the float sums differs (the pipeline accumulates micro-batch
    # gradients, tensor parallelism splits the matmuls), 0.0005 nats at most after these 47 steps (measured
    # 2026-11-28: 2.9450-2.9455); another seed moves the loss by 0.18 (3.130 against 2.945): the bound tells the two
    # apart. (50,000 bytes of corpus: 100,000 cost CI twice the minutes for the same findings.)
    for run_id in ("gpt-tp", "gpt-fsdp", "gpt-pp", "gpt-dp2-pp2", "gpt-dp2-tp2", "gpt-fsdp2-tp2"):
        assert abs(_validation_loss(_events(out, run_id)) - alone) < 0.02, run_id
    budget = next(e for e in _events(out, "gpt-budget")[0] if e["kind"] == "run_start")
    assert (budget["stop_criterion"], budget["stop_value"]) == ("samples", 320)


@pytest.mark.parametrize(
    ("run_id", "layout", "replica_ranks", "workers"),
    [("gpt-1", "dp1", 1, 1), ("gpt-tp", "tp2", 2, 2), ("gpt-fsdp", "fsdp2", 1, 2), ("gpt-pp", "pp2", 2, 2),
     ("gpt-dp2-pp2", "dp2,pp2", 2, 4), ("gpt-dp2-tp2", "dp2,tp2", 2, 4), ("gpt-fsdp2-tp2", "fsdp2,tp2", 2, 4)],
)  # fmt: skip
def test_rates_come_from_every_rank_and_the_layout(
    layouts: tuple[Path, dict[str, dict[str, Any]]],
    run_id: str,
    layout: str,
    replica_ranks: int,
    workers: int,
) -> None:
    out, runs = layouts
    run, events = runs[run_id], _events(out, run_id)
    assert run["layout"] == layout and run["world_size"] == workers and len(events) == workers
    assert run["tokens_per_s"] == pytest.approx(_tokens_per_s_from_files(events, replica_ranks), rel=1e-9)
    assert run["tokens_per_s"] == pytest.approx(run["samples_per_s"] * 64, rel=1e-9)  # 64 tokens a sequence
    assert run["tokens_per_s_per_worker"] == pytest.approx(run["tokens_per_s"] / workers, rel=1e-12)
    assert "each data-parallel replica's samples and tokens counted once" in run["rates_are"]


def test_the_layout_and_the_flops_land_with_the_run(layouts: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    out, runs = layouts
    for run_id in ("gpt-tp", "gpt-pp", "gpt-dp2-pp2"):
        starts = [e for evs in _events(out, run_id).values() for e in evs if e["kind"] == "run_start"]
        assert len(starts) == runs[run_id]["world_size"] and all(s["schema"] >= 3 for s in starts)
        s = starts[0]
        assert s["parallel"] == runs[run_id]["parallel"]
        # the optimizer it trains with, said alike by run_start and its hyper-parameters (AdamW, never "sgd")
        assert s["optimizer"] == s["hyperparameters"]["optimizer"] == "adamw"
        # gpt-tiny: 2 layers of hidden 64, 4 heads, ffn 256, vocab 256 (bytes), 64 tokens of context
        layers, d, ffn, vocab, t = 2, 64, 256, 256, 64
        block = 4 * (d * d + d) + (d * ffn + ffn) + (ffn * d + d) + 4 * d
        embedding = vocab * d + t * d
        total = embedding + layers * block + 2 * d + d * vocab
        assert (s["params_total"], s["params_embedding"]) == (total, embedding)
        n = total - embedding
        assert s["flops_per_token"] == {
            "palm": 6 * n + 12 * layers * d * t,
            "megatron": 6 * n + 6 * layers * d * t,
        }
        assert (
            s["global_batch_tokens"] == 32 * t and s["sequence_length"] == t and s["compute_dtype"] == "fp32"
        )
    pp = next(e for e in _events(out, "gpt-pp")[0] if e["kind"] == "run_start")
    assert (pp["pipeline_schedule"], pp["microbatches"], pp["comm_dimensions"]) == ("1f1b", 4, ["pp"])
    steps = [e for evs in _events(out, "gpt-pp").values() for e in evs if e["kind"] == "step"]
    assert all(e["comm_measured"] for e in steps) and sum(e["t_comm"] for e in steps) > 0  # the stages waited
    hybrid = next(e for e in _events(out, "gpt-dp2-pp2")[0] if e["kind"] == "run_start")
    assert hybrid["comm_dimensions"] == ["dp", "pp"] and hybrid["local_batch_size"] == 16
    tp = [e for evs in _events(out, "gpt-tp").values() for e in evs if e["kind"] == "step"]
    assert not any(e["comm_measured"] for e in tp)  # tensor parallelism's all-reduces stay inside compute


@pytest.mark.parametrize(
    ("parallel", "workers", "says"),
    [("tp3", 2, "multiply to 3"), ("dp2,fsdp", 4, "HSDP"), ("cp2", 2, "context/expert"), ("xx", 2, "not a dimension"),
     ("tp2,pp2", 4, "not offered"), ("pp", 2, "cannot fill"), ("mlp", 2, "an option of --model gpt")],
)  # fmt: skip
def test_a_layout_that_cannot_run_is_refused_with_what_to_do(
    tmp_path: Path, parallel: str, workers: int, says: str
) -> None:
    from honestscale.runners import _layouts

    if parallel == "mlp":  # the transformer's options are refused for another model, never silently ignored
        result = hs("run", "--framework", "torch", "--workers", "1", "--model", "mlp", "--parallel", "tp",
                    "--out", tmp_path, timeout=120)  # fmt: skip
        assert result.returncode == 2 and says in result.stderr and "--parallel" in result.stderr
        return
    if (
        parallel == "pp"
    ):  # 2 layers over 2 ranks x 2 interleaved stages: a run that fails, with the reason recorded
        out = tmp_path / "runs"
        result = hs("run", "--framework", "torch", "--workers", "2", *COMMON, "--parallel", "pp", "--pipeline-schedule",
                    "interleaved-1f1b", "--run-id", "bad", "--out", out, timeout=300)  # fmt: skip
        assert result.returncode == 1
        # the rank that failed first says why (the other may be stopped by the launcher before it can)
        stops = [e for evs in _events(out, "bad").values() for e in evs if e["kind"] == "run_stop"]
        assert {e["status"] for e in stops} == {"failed"}
        assert any(says in e["reason"] and "--model-size" in e["reason"] for e in stops), stops
        return
    with pytest.raises(_layouts.LayoutError, match=says):
        _layouts.parse(parallel, workers)
