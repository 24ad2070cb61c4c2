"""Build campaigns from events for the linter's rule cases (tests/lint_cases/HSnnn.yaml).

A case describes runs compactly; this module writes them as real event files with the
contract's EventWriter (run_start, steps, evaluations, run_stop), ingests them with the collector
into a fresh store, and records the campaign spec the way `honestscale campaign run` does.

The default campaign is a careful one: ResNet-50 on ImageNet on A100s, strong scaling from 1 to 8
workers, 6 repetitions per point, a tuning study, test accuracy, real data, fixed target - it
passes every rule. Each case changes what its rule is about.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb

from honestscale.collector._sources import discover
from honestscale.collector.ingest import Ingester
from honestscale.events import EventWriter
from honestscale.store import open_store
from honestscale.view import View
from honestscale.view import build as build_view

T0 = 1_750_000_000.0

BASE: dict[str, Any] = {
    "campaign": "c",
    "framework": "torch",
    "framework_version": "2.4.0",
    "launcher": "slurm",
    "backend": "nccl",
    "accelerator": "NVIDIA A100-SXM4-40GB",
    "cpu": "AMD EPYC 7742 64-Core Processor",
    "interconnect": "InfiniBand HDR",
    "isolation": {
        "exclusive": True,
        "host_load_1m": 3.1,
        "cpus": 64,
        "ranks_on_host": 4,
        "other_accelerator_processes": 0,
        "data_filesystem": "lustre",
    },
    "software": {"cuda": "12.4", "cudnn": "9.1.0", "nccl": "2.21.5", "driver": "550.54"},
    "model": "resnet50",
    "dataset": "imagenet",
    "train_size": 1_231_167,
    "validation_size": 50_000,
    "test_size": 50_000,
    "data_source": "filesystem",
    "data_path": "/lustre/datasets/imagenet",
    "input_shape": [3, 224, 224],
    "global_batch_size": 1024,
    "optimizer": "sgd",
    "learning_rate": 0.4,
    "precision": "amp-bf16",
    "stop_criterion": "target_accuracy",
    "stop_value": 0.759,
    "target_metric": "top1_accuracy",
    "scope": "end_to_end",
    "scaling": "strong",
    "purpose": "final",
}

# run keys that are not run_start fields
SHAPE_KEYS = {
    "workers", "reps", "test_acc", "val_acc", "status", "ttt", "steps", "step_s", "first_step_s",
    "warmup_marked", "t_data", "evals", "split", "id", "ttt_by_rep", "stalls", "stall_s", "metric",
    "ranks", "rank_fields", "clock_back", "stop_at", "step_s_by_rep", "step_ranks", "rank_step_s", "settle", "drift",
    "pressure", "settle_reps",
}  # fmt: skip


def _hash(start: dict[str, Any]) -> str:
    keep = {k: v for k, v in start.items() if k not in ("seed", "campaign", "purpose", "tuning_trial")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:16]


def write_run(out: Path, run_id: str, spec: dict[str, Any], rep: int, t0: float) -> None:
    workers = int(spec.get("workers", 1))
    start = {**BASE, **{k: v for k, v in spec.items() if k not in SHAPE_KEYS}}
    start.setdefault("world_size", workers)
    start.setdefault("nodes", max(1, workers // 4))
    start.setdefault("accelerators_per_node", min(workers, 4) if start.get("accelerator") else 0)
    if start.get("global_batch_size") and "local_batch_size" not in start:
        start["local_batch_size"] = max(1, int(start["global_batch_size"]) // workers)
    start.setdefault("config_hash", _hash(start))
    start["seed"] = rep
    start = {k: v for k, v in start.items() if v is not None}
    ttt = spec.get("ttt_by_rep", [None] * 100)[rep] or float(spec.get("ttt", 3600.0 / workers))
    n_steps = int(spec.get("steps", 20))
    # steps take the same share of every run's time, so step throughput and time to train agree
    step_s = float((spec.get("step_s_by_rep") or [None] * 100)[rep] or spec.get("step_s", ttt / 72_000))
    n_stalls = int(spec.get("stalls", 0))  # steps that stall (a busy host), spread after the warm-up
    stalled = {5 + j * max(1, (n_steps - 5) // max(1, n_stalls)) for j in range(n_stalls)}
    # every rank writes run_start and run_stop, rank 0 its steps and evaluations too; impossible data: ``ranks``
    # written (0..world_size-1 by default), ``rank_fields`` {rank: run_start fields that differ}, ``clock_back``
    # seconds the clock steps back after step 3, ``stop_at`` the run_stop time (from t0).
    # ``step_ranks: all``: every rank writes its steps, its replica's samples (the global batch over the
    # data-parallel replicas: world size / (tp x pp x cp)), at ``rank_step_s`` {rank: seconds} (step_s otherwise).
    # A run with a ``sequence_length`` counts tokens per step: samples x sequence length.
    every = spec.get("step_ranks") == "all"
    layout = start.get("parallel") or {}
    replicas = max(1, int(start.get("world_size", workers)) // max(1, int(layout.get("tp", 1)) * int(layout.get("pp", 1))
                                                                   * int(layout.get("cp", 1))))  # fmt: skip
    for rank in spec.get("ranks", range(int(start.get("world_size", workers)))):
        clock = [t0]
        w = EventWriter(out, run_id, rank, clock=lambda clock=clock: clock[0])
        w.run_start(**{**start, **(spec.get("rank_fields") or {}).get(rank, {})})
        for i in range(n_steps if rank == 0 or every else 0):
            clock[0] = (
                t0 + (i + 1) * ttt / (n_steps + 2) - (float(spec.get("clock_back", 0.0)) if i > 3 else 0.0)
            )
            mine = float((spec.get("rank_step_s") or {}).get(rank, step_s))
            t = float(spec.get("first_step_s", mine)) if i == 0 else mine
            slowed = 0.0
            # [N, f]: the first N steps f times slower at first, settling linearly (in the repetitions ``settle_reps``)
            if spec.get("settle") and rep in spec.get("settle_reps", range(rep + 1)):
                n, f = spec["settle"]
                slowed = t * (f - 1) * max(0.0, 1 - i / n)
                t = t + slowed
            if spec.get("drift"):  # the step time rises by this share over the run: no steady state
                t = t * (1 + float(spec["drift"]) * i / n_steps)
            if i in stalled:
                t = float(spec.get("stall_s", 50 * step_s))
            fields: dict[str, Any] = {"epoch": 0, "step": i, "samples": int(start.get("global_batch_size") or 128), "t_total": t, "t_compute": t * 0.8,
                                      "t_comm": t * 0.1, "t_optimizer": t * 0.05}  # fmt: skip
            if every:
                fields["samples"] = int(fields["samples"]) // replicas
            if start.get("sequence_length"):
                fields["tokens"] = int(fields["samples"]) * int(start["sequence_length"])
            if spec.get("t_data", True):
                fields["t_data"] = t * 0.05
            if spec.get("warmup_marked", True):
                fields["warmup"] = i < 2
            # the host's CPU wait (contract 5): "load": the settling steps' extra time was spent waiting for a CPU
            # (someone else's work); "busy": 60 % of every step; "even": the same seconds every step (half a
            # steady step: a load that slows no step more than another); "quiet": measured, and none
            if spec.get("pressure"):
                fields["cpu_pressure"] = {"load": slowed, "busy": 0.6 * t, "even": 0.5 * step_s}.get(
                    spec["pressure"], 0.0
                )
            w.step(**fields)
        clock[0] = t0 + ttt * 0.99
        if rank == 0:
            _evals(w, spec)
        clock[0] = t0 + float(spec.get("stop_at", ttt))
        status = spec.get("status", "success")
        if status != "incomplete":
            w.run_stop(status, None if status == "success" else f"{status} in the fixture")
        w.close()


def _evals(w: EventWriter, spec: dict[str, Any]) -> None:
    for e in spec.get("evals", []):
        w.eval(**e)
    if spec.get("val_acc", 0.762) is not None:
        w.eval(
            split="validation",
            metric=spec.get("metric", "top1_accuracy"),
            value=float(spec.get("val_acc", 0.762)),
            epoch=40,
        )
    if spec.get("test_acc", 0.760) is not None and spec.get("split", "test") == "test":
        w.eval(
            split="test",
            metric=spec.get("metric", "top1_accuracy"),
            value=float(spec.get("test_acc", 0.760)),
            epoch=40,
        )


def build(tmp: Path, case: dict[str, Any]) -> Path:
    """Write the case's runs as events, ingest them into a fresh store, record the spec; return the store."""
    out = tmp / "events"
    planned: list[str] = []
    t0 = T0
    for i, spec in enumerate(case["runs"]):
        for rep in range(int(spec.get("reps", 6))):
            run_id = f"{spec.get('id', 'p' + str(i))}-w{spec.get('workers', 1)}-r{rep}"
            write_run(out, run_id, spec, rep, t0)
            planned.append(run_id)
            t0 += 10_000
    store = tmp / "store.duckdb"
    con = open_store(store)
    try:
        Ingester(con).ingest(discover([str(out)]).sources)
        record = dict(case.get("spec", {}))
        if record.get("planned_runs", True) is not False:
            record["planned_runs"] = planned + list(case.get("also_planned", []))
        else:
            record.pop("planned_runs")
        campaign = case.get("campaign", "c")
        if case.get("record_spec", True):
            con.execute("INSERT INTO campaigns (name, spec) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
                        [campaign, json.dumps(record)])  # fmt: skip
    finally:
        con.close()
    return store


def open_ro(store: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(store), read_only=True)


def view_of(tmp: Path, case: dict[str, Any], campaign: str = "c") -> View:
    """The linter's view of a case's campaign, built from its events in a fresh store."""
    con = open_store(build(tmp, case))
    try:
        return build_view(con, campaign)
    finally:
        con.close()


GOOD: list[dict[str, Any]] = [
    {"id": "base", "workers": 1, "ttt": 28_800.0, "tuning_study": "lr", "tuning_trial": "lr=0.4"},
    {"id": "big", "workers": 8, "ttt": 4_000.0, "tuning_study": "lr", "tuning_trial": "lr=0.4"},
    {"id": "trial-a", "purpose": "tuning", "tuning_study": "lr", "tuning_trial": "lr=0.4", "workers": 8, "reps": 1,
     "learning_rate": 0.4, "stop_criterion": "epochs", "stop_value": 10, "split": "validation", "ttt": 1000.0},
    {"id": "trial-b", "purpose": "tuning", "tuning_study": "lr", "tuning_trial": "lr=0.8", "workers": 8, "reps": 1,
     "learning_rate": 0.8, "stop_criterion": "epochs", "stop_value": 10, "split": "validation", "ttt": 1000.0},
]  # fmt: skip


def case_runs(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The good campaign with the case's changes: ``change`` {id or 'finals' or 'all': fields}, ``remove``, ``add``."""
    if "runs" in case:
        return list(case["runs"])
    runs = [dict(r) for r in GOOD if r["id"] not in case.get("remove", [])]
    for target, fields in (case.get("change") or {}).items():
        for r in runs:
            final = r.get("purpose", "final") == "final"
            if target == "all" or (target == "finals" and final) or r["id"] == target:
                r.update(fields)
    return runs + list(case.get("add", []))


# The main job on a busy 2-core host: 1 worker ran 2 threads (OMP_NUM_THREADS set by the launcher) and lost most
# of its time to stalls on a loaded host; each of 2 workers ran 1 thread. Six repetitions a point, as the campaign.
MAIN_JOB = {"global_batch_size": 64, "local_batch_size": 64, "model": "mlp", "dataset": "digits",
            "input_shape": [1, 8, 8], "accelerator": None, "framework": "torch", "framework_version": "2.13.0",
            "launcher": "local", "cpu": "Intel(R) Xeon(R) CPU @ 2.20GHz", "data_source": "in_memory",
            "stop_criterion": "target_accuracy", "stop_value": 0.95, "target_metric": "accuracy",
            "campaign": "digits-scaling", "metric": "accuracy", "val_acc": 0.96, "test_acc": 0.955, "steps": 190,
            "inter_op_threads": 2, "cpus_allowed": 2, "cpu_affinity": [0, 1]}  # fmt: skip
BUSY = [
    {**MAIN_JOB, "id": "w1", "workers": 1, "backend": "none", "intra_op_threads": 2,
     "launch_env": {"OMP_NUM_THREADS": "2", "HONESTSCALE_LAUNCHER_SET": "OMP_NUM_THREADS"},
     "step_s": 0.0013, "stalls": 30, "stall_s": 0.04, "ttt_by_rep": [1.9, 2.0, 2.1, 2.2, 1.8, 2.0],
     "isolation": {"exclusive": None, "host_load_1m": 4.2, "cpus": 2, "ranks_on_host": 1}},
    {**MAIN_JOB, "id": "w2", "workers": 2, "backend": "gloo", "local_batch_size": 32, "intra_op_threads": 1,
     "launch_env": {"OMP_NUM_THREADS": "1", "HONESTSCALE_LAUNCHER_SET": "OMP_NUM_THREADS"},
     "step_s": 0.002, "ttt_by_rep": [0.45, 0.49, 0.5, 0.52, 0.48, 0.47],
     "isolation": {"exclusive": None, "host_load_1m": 1.2, "cpus": 2, "ranks_on_host": 2}},
]  # fmt: skip


# the main job's spec: HS106 silenced with its written reason (examples/digits-campaign.toml)
SPEC = {
    "tool": {
        "honestscale": {
            "lint": {
                "ignore": [
                    {
                        "code": "HS106",
                        "reason": "digits is read into memory on purpose: the campaign studies gradient exchange",
                    }
                ]
            }
        }
    }
}
