"""Rank and world discovery from the launchers' environments."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from honestscale.record.world import DEFAULT_PORT, WorldError, discover, expand_hostlist, slurm_port


@pytest.mark.parametrize(
    ("hostlist", "hosts"),
    [
        ("node003", ["node003"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[1-2],login1", ["gpu1", "gpu2", "login1"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("a[08-10]", ["a08", "a09", "a10"]),
    ],
)
def test_slurm_hostlists_expand(hostlist: str, hosts: list[str]) -> None:
    assert expand_hostlist(hostlist) == hosts


def test_torchrun_first() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29400", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "n[1-2]"}  # fmt: skip
    w = discover(env)
    assert (w.rank, w.local_rank, w.world_size, w.master_addr, w.master_port) == (3, 1, 4, "n1", 29400)
    assert w.launcher == "torchrun" and w.nodes == 2


def test_open_mpi_then_pmi() -> None:
    ompi = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "MASTER_ADDR": "h0"}  # fmt: skip
    w = discover(ompi)
    assert (w.rank, w.local_rank, w.world_size, w.nodes, w.launcher) == (5, 1, 8, 2, "mpirun")
    pmi = {"PMI_RANK": "2", "PMI_SIZE": "4", "SLURM_JOB_ID": "1234", "SLURM_JOB_NODELIST": "c[1-2]"}
    w = discover(pmi)
    assert (w.rank, w.world_size, w.master_addr, w.launcher) == (2, 4, "c1", "slurm")
    assert w.master_port == slurm_port("1234")


def test_slurm_srun() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_JOB_NODELIST": "gpu[07-10]",
           "SLURM_JOB_ID": "987654", "SLURM_STEP_ID": "0", "SLURM_NTASKS_PER_NODE": "2(x4)",
           "SLURM_JOB_NUM_NODES": "4"}  # fmt: skip
    w = discover(env)
    assert (w.rank, w.local_rank, w.world_size, w.local_world_size) == (5, 1, 8, 2)
    assert w.master_addr == "gpu07" and w.nodes == 4 and w.launcher == "slurm"
    assert w.master_port == slurm_port("987654") and 20000 <= w.master_port < 30000
    assert w.slurm_job_id == "987654" and w.slurm_step_id == "0"


def test_single_process_and_bad_values() -> None:
    w = discover({})
    assert (w.rank, w.world_size, w.launcher) == (0, 1, "local")
    with pytest.raises(WorldError, match="RANK='x' is not an integer"):
        discover({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(WorldError, match="rank 4 is outside the world of 4"):
        discover({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(WorldError, match="SLURM_JOB_NODELIST is not"):
        discover({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})


def test_horovod_gloo() -> None:
    env = {"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2"}
    w = discover({**env, "HOROVOD_GLOO_RENDEZVOUS_ADDR": "hv0", "MASTER_PORT": "29401"})
    assert (w.rank, w.local_rank, w.world_size, w.local_world_size, w.nodes) == (3, 1, 4, 2, 2)
    assert (w.master_addr, w.master_port, w.launcher) == ("hv0", 29401, "horovodrun")
    w = discover({**env, "SLURM_JOB_NODELIST": "g[3-4]"})
    assert (w.master_addr, w.master_port, w.node_list) == ("g3", DEFAULT_PORT, ("g3", "g4"))


def test_pmi_outside_slurm_is_mpirun() -> None:
    w = discover({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"})
    assert (w.rank, w.local_rank, w.world_size, w.local_world_size) == (1, 1, 2, 2)
    assert (w.master_addr, w.master_port, w.launcher, w.nodes) == ("127.0.0.1", DEFAULT_PORT, "mpirun", 1)


def test_slurm_array_task_and_local_hosts() -> None:
    env = {"SLURM_JOB_ID": "99", "SLURM_ARRAY_JOB_ID": "98", "SLURM_ARRAY_TASK_ID": "1", "SLURM_STEP_ID": "2"}
    w = discover(env)
    assert (w.launcher, w.slurm_job_id, w.slurm_step_id) == ("local", "98_1", "2")
    assert w.node_list == (socket.gethostname(),) and w.nodes == 1


def test_precedence_is_the_docstring_order() -> None:
    """With every launcher's variables set, the first of the docstring's order wins; take it away, the next wins."""
    rows = [
        ("torchrun", {"RANK": "0", "WORLD_SIZE": "8"}),
        ("horovodrun", {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "8"}),
        ("mpirun", {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8"}),
        ("slurm", {"PMI_RANK": "3", "PMI_SIZE": "8"}),
        ("slurm", {"SLURM_PROCID": "4", "SLURM_NTASKS": "8"}),
    ]
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"}
    for _, variables in rows:
        env.update(variables)
    seen = []
    for _, variables in rows:
        w = discover(env)
        seen.append((w.launcher, w.rank))
        for name in variables:
            del env[name]
    assert seen == [(launcher, rank) for rank, (launcher, _) in enumerate(rows)]
    assert discover(env).launcher == "local"


def test_the_local_launcher_reserves_tensorflows_grpc_ports_and_the_runner_uses_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TensorFlow's workers each start a gRPC server; MASTER_PORT+1.. was taken on a busy CI host (a CI run failed
    with 'Could not start gRPC server'), so the launcher hands every rank ports it found free."""
    from honestscale.campaign.launch import _jobs
    from honestscale.runners.tf_keras import _tf_config

    jobs = _jobs("tensorflow", 3, "python3", ["python3", "-m", "honestscale.runners.tf_keras"])
    envs = [env for _, env, _ in jobs]
    ports = [int(p) for p in envs[0]["HONESTSCALE_WORKER_PORTS"].split(",")]
    assert len({*ports, int(envs[0]["MASTER_PORT"])}) == 4
    assert all(env["HONESTSCALE_WORKER_PORTS"] == envs[0]["HONESTSCALE_WORKER_PORTS"] for env in envs)
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(10000 <= p < low for p in ports), (
        "outside the ephemeral range: no outgoing connection takes them"
    )
    for port in ports:  # free when chosen, on every address (gRPC binds 0.0.0.0)
        with socket.socket() as s:
            s.bind(("", port))
    # set, then removed: monkeypatch restores it as it was (absent) after the test. A bare delenv of an absent
    # variable records nothing, and _tf_config's TF_CONFIG then leaked into the test worker's later TensorFlow runs
    # (both ranks took one task's port: "Could not start gRPC server", three CI runs)
    monkeypatch.setenv("TF_CONFIG", "")
    for rank, env in enumerate(envs):
        monkeypatch.delenv("TF_CONFIG")
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                    "HONESTSCALE_WORKER_PORTS", "HONESTSCALE_LAUNCHER"):  # fmt: skip
            monkeypatch.setenv(key, env[key])
        _tf_config(discover(dict(env)))
        config = json.loads(os.environ["TF_CONFIG"])
        assert config == {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                          "task": {"type": "worker", "index": rank}}  # fmt: skip
