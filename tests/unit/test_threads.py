"""Threads per worker (event contract 2): each runner asks its framework, the shared builder adds the CPUs a rank may
run on and the launcher's knobs, the store lands them beside runs recorded before (contract 1) and migrates old
stores; the launcher says which knobs it set. (The real 2-rank run: tests/system/test_torch_runner.py.)"""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from honestscale import events as ev
from honestscale.campaign.launch import thread_split
from honestscale.record.world import World
from honestscale.runners import torch_ddp
from honestscale.runners._run_start import Data, Framework, Model, Sizes, Stop, Threads
from honestscale.runners.instrument import environment, run_start_fields
from honestscale.store import open_store
from tests.conftest import EXAMPLE, REPO, hs, query, store_at_version

WORLD = World(rank=0, local_rank=0, world_size=1, local_world_size=1, master_addr="127.0.0.1", master_port=0,
              launcher="local", nodes=1)  # fmt: skip


def _fields(threads: tuple[int | None, int | None]) -> dict[str, Any]:
    args = torch_ddp.build_parser().parse_args(["--model", "mlp", "--dataset", "digits", "--out", "runs"])
    return run_start_fields(
        args, WORLD, runner="honestscale.runners.torch_ddp", default_name="mlp-digits-1w",
        environment=environment(WORLD, REPO), framework=Framework("torch", "2.13.0", "none", {}),
        model=Model("mlp", 10, (1, 8, 8)),
        data=Data("digits", Sizes(1257, 270, 270), "in_memory", None, local_batch_size=64),
        stop=Stop("epochs", 3), threads=Threads(*threads),
    )  # fmt: skip


def test_the_builder_records_the_threads_the_runner_reports_its_cpus_and_the_launchers_knobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for knob in ev.THREAD_KNOBS:
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    monkeypatch.setenv("HONESTSCALE_LAUNCHER_SET", "OMP_NUM_THREADS")
    monkeypatch.setenv("PATH_NOT_A_KNOB", "x")
    fields = _fields((2, 1))
    cpus = sorted(os.sched_getaffinity(0))
    assert (fields["intra_op_threads"], fields["inter_op_threads"]) == (2, 1)
    assert fields["cpu_affinity"] == cpus and fields["cpus_allowed"] == len(cpus)
    assert fields["launch_env"] == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
                                    "HONESTSCALE_LAUNCHER_SET": "OMP_NUM_THREADS"}  # fmt: skip
    event = {
        "schema": ev.SCHEMA_VERSION,
        "run_id": "r",
        "rank": 0,
        "seq": 0,
        "time": 1.7e9,
        "kind": "run_start",
    }
    assert ev.validate(json.loads(json.dumps(event | fields)))["intra_op_threads"] == 2
    # a framework that cannot tell (None) leaves the field out: unknown, never 0; 0 means "the framework chooses"
    unknown = _fields((None, 0))
    assert "intra_op_threads" not in unknown and unknown["inter_op_threads"] == 0
    # the same definition, whatever the threads: they describe the machine's split, not the experiment
    assert unknown["config_hash"] == fields["config_hash"]


def test_every_runner_asks_its_own_framework_for_its_threads() -> None:
    """TensorFlow and MXNet are not installed here: each runner's call of the builder is read instead."""
    asked = {"torch_ddp": {"get_num_threads", "get_num_interop_threads"},
             "tf_keras": {"get_intra_op_parallelism_threads", "get_inter_op_parallelism_threads"},
             "mxnet_gluon": {"_mxnet_threads"}}  # fmt: skip
    for name, calls in asked.items():
        tree = ast.parse((REPO / "honestscale" / "runners" / f"{name}.py").read_text(encoding="utf-8"))
        (builder,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "run_start_fields"]  # fmt: skip
        (threads,) = [k.value for k in builder.keywords if k.arg == "threads"]
        named = {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(threads)
                 if isinstance(n, ast.Attribute | ast.Name)}  # fmt: skip
        assert calls <= named, (name, named)


def test_mxnet_threads_come_from_the_environment_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from honestscale.runners import mxnet_gluon

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MXNET_CPU_WORKER_NTHREADS", raising=False)
    assert mxnet_gluon._mxnet_threads() == (None, 1)  # OpenMP unknown; one engine worker unless set
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("MXNET_CPU_WORKER_NTHREADS", "2")
    assert mxnet_gluon._mxnet_threads() == (4, 2)


def test_the_launcher_splits_the_cpus_and_says_what_it_set() -> None:
    # the busy machine: 2 CPUs, 1 worker gets 2 threads and each of 2 workers 1
    assert thread_split(1, {}, cpus=2) == {
        "OMP_NUM_THREADS": "2",
        "HONESTSCALE_LAUNCHER_SET": "OMP_NUM_THREADS",
    }
    assert thread_split(2, {}, cpus=2)["OMP_NUM_THREADS"] == "1"
    assert thread_split(4, {}, cpus=2)["OMP_NUM_THREADS"] == "1"  # never 0
    assert thread_split(2, {"OMP_NUM_THREADS": "8"}, cpus=2) == {
        "HONESTSCALE_LAUNCHER_SET": ""
    }  # the caller's
    assert thread_split(1, {})["OMP_NUM_THREADS"] == str(len(os.sched_getaffinity(0)))  # the CPUs it may use


def _contract_2_run(out: Path) -> str:
    with ev.EventWriter(out, "threads-r0", 0) as w:
        w.run_start(**_fields((2, 1)))
        w.run_stop("success")
    return "threads-r0"


def test_contract_1_and_2_events_land_side_by_side(tmp_path: Path) -> None:
    """The real digits-ddp runs (contract 1, recorded before the step) land as they are, threads unknown."""
    folder = tmp_path / "in"
    shutil.copytree(EXAMPLE, folder)
    assert {json.loads(line)["schema"] for f in folder.rglob("*.jsonl") for line in f.open()} == {1}
    new = _contract_2_run(folder)
    store = tmp_path / "s.duckdb"
    result = hs("ingest", folder, "--store", store)
    assert result.returncode == 0, result.stdout + result.stderr
    assert query(store, "SELECT count(*) FROM quarantine") == [(0,)]
    rows = dict(query(store, "SELECT run_id, intra_op_threads FROM runs"))
    assert len(rows) == 5 and rows.pop(new) == 2 and set(rows.values()) == {None}
    (got,) = query(store, "SELECT inter_op_threads, cpus_allowed, cpu_affinity, launch_env FROM runs "
                          f"WHERE run_id = '{new}'")  # fmt: skip
    assert got[0] == 1 and got[1] == len(os.sched_getaffinity(0))
    assert json.loads(got[2]) == sorted(os.sched_getaffinity(0)) and isinstance(json.loads(got[3]), dict)


def test_a_store_from_before_the_threads_is_migrated_and_keeps_what_its_runs_recorded(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    recorded = {"intra_op_threads": 2, "inter_op_threads": 1, "cpus_allowed": 2, "cpu_affinity": [0, 1],
                "launch_env": {"OMP_NUM_THREADS": "2"}}  # fmt: skip
    with store_at_version(store, 4) as con:  # the store as honestscale left it at migration 0004
        for run_id, attrs in (("extras", recorded), ("before", {"framework": "torch"})):
            con.execute("INSERT INTO runs (run_id, source, status, ranks_seen, ranks_stopped, attrs) "
                        "VALUES (?, 'native', 'success', 1, 1, ?)", [run_id, json.dumps(attrs)])  # fmt: skip
    open_store(store).close()
    rows = {r[0]: r[1:] for r in query(store, "SELECT run_id, intra_op_threads, inter_op_threads, cpus_allowed, "
                                              "cpu_affinity, launch_env FROM runs")}  # fmt: skip
    assert rows["extras"][:3] == (2, 1, 2) and json.loads(rows["extras"][3]) == [0, 1]
    assert json.loads(rows["extras"][4]) == {"OMP_NUM_THREADS": "2"}
    assert rows["before"] == (None, None, None, None, None)  # not recorded: unknown, not 0
