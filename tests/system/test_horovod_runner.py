"""Horovod 0.28.1 for real: both front ends (PyTorch, TF/Keras) on 2 ranks started by horovodrun with Gloo.

The environment is .venv-hvd (or $HONESTSCALE_HVD_PYTHON), built by scripts/build-horovod-env; .ci/run builds it,
so in CI a missing one fails.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from honestscale.collector._timeline import comm_intervals
from tests.conftest import framework_python, hs, query, snapshot, two_worker_run


@pytest.fixture(scope="module")
def hvd_python() -> str:
    framework_python("horovod-tf")
    return framework_python("horovod-torch")


def test_horovod_torch_two_ranks_land_as_one_run(tmp_path: Path, store: Path, hvd_python: str) -> None:
    shown, _ = two_worker_run(tmp_path, store, "horovod-torch")
    assert shown["framework_version"] == "0.28.1" and shown["software"]["torch"].startswith("2.13")
    assert shown["launcher"] == "horovodrun" and shown["backend"] == "gloo"
    # the wait in DistributedOptimizer.synchronize() is measured on every rank, and it is not nothing
    per_rank = query(
        store, "SELECT rank, bool_and(comm_measured), sum(t_comm) FROM steps GROUP BY rank ORDER BY rank"
    )
    assert [r[0] for r in per_rank] == [0, 1] and all(r[1] and r[2] > 0 for r in per_rank)


def test_horovod_tf_timeline_becomes_communication_time(tmp_path: Path, store: Path, hvd_python: str) -> None:
    shown, folder = two_worker_run(tmp_path, store, "horovod-tf", "--horovod-timeline")
    assert shown["framework_version"] == "0.28.1" and shown["software"]["tensorflow"].startswith("2.15")
    assert shown["launcher"] == "horovodrun" and shown["backend"] == "gloo"
    timeline = folder / "horovod-timeline.json"
    spans = comm_intervals(timeline)
    assert spans and all(b < e for b, e in spans)
    assert all(e1 <= b2 for (_, e1), (b2, _) in itertools.pairwise(spans))  # merged, in order
    # rank 0 (the coordinator, who wrote the timeline) has its all-reduce time; rank 1 says it was not measured
    rank0 = query(
        store, "SELECT count(*), count(*) FILTER (comm_measured), sum(t_comm) FROM steps WHERE rank = 0"
    )
    assert rank0[0][0] == rank0[0][1] and rank0[0][2] > 0
    assert query(store, "SELECT bool_or(comm_measured) FROM steps WHERE rank = 1") == [(False,)]
    # the all-reduce time inside a step never exceeds that step, and ingesting again changes nothing
    worst = query(store, "SELECT max(t_comm - t_total) FROM steps WHERE rank = 0")[0][0]
    assert worst <= 1e-9
    before = snapshot(store)
    again = hs("ingest", folder, "--store", store)
    assert again.returncode == 0 and snapshot(store) == before


def test_timeline_without_its_run_is_refused_by_name(tmp_path: Path, store: Path) -> None:
    (tmp_path / "horovod-timeline.json").write_text('[\n{"name": "process_name", "ph": "M", "pid": 0}')
    result = hs("ingest", tmp_path / "horovod-timeline.json", "--store", store)
    assert result.returncode == 2 and "horovod-timeline.json" in result.stderr
    assert "events-rank0.jsonl" in result.stderr


def test_environment_without_horovod_names_the_build_script(tmp_path: Path) -> None:
    # honestscale's own environment has torch but no Horovod
    result = hs("run", "--framework", "horovod-torch", "--workers", "2", "--out", tmp_path,
                env={"HONESTSCALE_HVD_PYTHON": sys.executable})  # fmt: skip
    assert result.returncode == 2
    assert "horovod.torch.mpi_lib_v2" in result.stderr and "scripts/build-horovod-env" in result.stderr
