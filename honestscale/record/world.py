"""Who am I in the job: rank and world discovered from the launcher's environment (standard library only).

Checked in this order, the first that is complete wins:

1. torchrun (and ``honestscale run``): ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``;
2. ``horovodrun`` with Gloo: ``HOROVOD_RANK``, ``HOROVOD_SIZE``, ``HOROVOD_LOCAL_RANK``, ``HOROVOD_LOCAL_SIZE``;
   Open MPI (``mpirun``, ``horovodrun`` with MPI): ``OMPI_COMM_WORLD_RANK``, ``..._LOCAL_RANK``, ``..._SIZE``,
   ``..._LOCAL_SIZE``; then PMI (MPICH, Intel MPI, ``srun --mpi=pmi2``): ``PMI_RANK``, ``PMI_SIZE``;
3. Slurm (``srun``; ``srun --mpi=pmix`` for Horovod built with MPI): ``SLURM_PROCID``, ``SLURM_LOCALID``,
   ``SLURM_NTASKS``, with the master address the first host of ``SLURM_JOB_NODELIST`` (expanded:
   ``gpu[01-04,07]``) and a port derived from the job id;
4. otherwise one process: rank 0 of 1.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | horovodrun | mpirun | slurm | local
    nodes: int
    node_list: tuple[str, ...] = ()
    slurm_job_id: str | None = None
    slurm_step_id: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class WorldError(ValueError):
    """The launcher's environment is inconsistent; the message names the variable."""


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(hostlist: str) -> list[str]:
    """Expand a Slurm host list: ``gpu[01-03,07],login1`` -> gpu01 gpu02 gpu03 gpu07 login1."""
    hosts: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", hostlist):
        hosts.extend(_expand_one(part.strip().strip(",")))
    return [h for h in hosts if h]


def _expand_one(pattern: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", pattern)
    if m is None:
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    out: list[str] = []
    for item in m.group(1).split(","):
        r = _RANGE.match(item.strip())
        if r is None:
            raise WorldError(f"SLURM_JOB_NODELIST: cannot read range {item!r} in {pattern!r}")
        lo, hi = r.group(1), r.group(2) or r.group(1)
        width = len(lo)
        for n in range(int(lo), int(hi) + 1):
            out.extend(_expand_one(f"{head}{n:0{width}d}{tail}"))
    return out


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise WorldError(f"{name}={env[name]!r} is not an integer") from None


def slurm_port(job_id: str) -> int:
    """A port every rank of a Slurm job agrees on, away from the common defaults: 20000-29999."""
    digits = re.sub(r"\D", "", job_id) or "0"
    return 20000 + int(digits) % 10000


def discover(env: Mapping[str, str] | None = None) -> World:
    env = os.environ if env is None else env
    slurm_job = env.get("SLURM_JOB_ID")
    if env.get("SLURM_ARRAY_JOB_ID") and env.get(
        "SLURM_ARRAY_TASK_ID"
    ):  # an array task: name it as squeue does
        slurm_job = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    slurm_step = env.get("SLURM_STEP_ID")
    nodes_env = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    node_list = tuple(expand_hostlist(env["SLURM_JOB_NODELIST"])) if env.get("SLURM_JOB_NODELIST") else ()

    def nodes(default: int) -> int:
        return int(nodes_env) if nodes_env and nodes_env.isdigit() else (len(node_list) or default)

    if all(k in env for k in ("RANK", "WORLD_SIZE")):
        world = _int(env, "WORLD_SIZE")
        local_world = _int(env, "LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else world
        launcher = env.get("HONESTSCALE_LAUNCHER", "torchrun")
        return _checked(
            World(
                rank=_int(env, "RANK"),
                local_rank=_int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else _int(env, "RANK"),
                world_size=world,
                local_world_size=local_world,
                master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
                master_port=_int(env, "MASTER_PORT") if "MASTER_PORT" in env else DEFAULT_PORT,
                launcher=launcher,
                nodes=nodes(max(1, -(-world // max(local_world, 1)))),
                node_list=node_list,
                slurm_job_id=slurm_job,
                slurm_step_id=slurm_step,
            )
        )
    if "HOROVOD_RANK" in env and "HOROVOD_SIZE" in env:
        world = _int(env, "HOROVOD_SIZE")
        local_world = _int(env, "HOROVOD_LOCAL_SIZE") if "HOROVOD_LOCAL_SIZE" in env else world
        return _checked(
            World(
                rank=_int(env, "HOROVOD_RANK"),
                local_rank=_int(env, "HOROVOD_LOCAL_RANK") if "HOROVOD_LOCAL_RANK" in env else 0,
                world_size=world,
                local_world_size=local_world,
                master_addr=env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR")
                or (node_list[0] if node_list else "127.0.0.1"),
                master_port=_int(env, "MASTER_PORT") if "MASTER_PORT" in env else DEFAULT_PORT,
                launcher="horovodrun",
                nodes=nodes(max(1, -(-world // max(local_world, 1)))),
                node_list=node_list,
                slurm_job_id=slurm_job,
                slurm_step_id=slurm_step,
            )
        )
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        world = _int(env, "OMPI_COMM_WORLD_SIZE")
        local_world = (
            _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE") if "OMPI_COMM_WORLD_LOCAL_SIZE" in env else world
        )
        return _checked(
            World(
                rank=_int(env, "OMPI_COMM_WORLD_RANK"),
                local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK")
                if "OMPI_COMM_WORLD_LOCAL_RANK" in env
                else 0,
                world_size=world,
                local_world_size=local_world,
                master_addr=env.get("MASTER_ADDR") or (node_list[0] if node_list else "127.0.0.1"),
                master_port=_int(env, "MASTER_PORT") if "MASTER_PORT" in env else DEFAULT_PORT,
                launcher="mpirun",
                nodes=nodes(max(1, -(-world // max(local_world, 1)))),
                node_list=node_list,
                slurm_job_id=slurm_job,
                slurm_step_id=slurm_step,
            )
        )
    if "PMI_RANK" in env and "PMI_SIZE" in env:
        world = _int(env, "PMI_SIZE")
        return _checked(
            World(
                rank=_int(env, "PMI_RANK"),
                local_rank=_int(env, "MPI_LOCALRANKID") if "MPI_LOCALRANKID" in env else 0,
                world_size=world,
                local_world_size=_int(env, "MPI_LOCALNRANKS") if "MPI_LOCALNRANKS" in env else world,
                master_addr=env.get("MASTER_ADDR") or (node_list[0] if node_list else "127.0.0.1"),
                master_port=slurm_port(slurm_job) if slurm_job else DEFAULT_PORT,
                launcher="slurm" if slurm_job else "mpirun",
                nodes=nodes(1),
                node_list=node_list,
                slurm_job_id=slurm_job,
                slurm_step_id=slurm_step,
            )
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        if not node_list:
            raise WorldError("SLURM_PROCID is set but SLURM_JOB_NODELIST is not: run the ranks with srun")
        world = _int(env, "SLURM_NTASKS")
        per_node = env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        return _checked(
            World(
                rank=_int(env, "SLURM_PROCID"),
                local_rank=_int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0,
                world_size=world,
                local_world_size=int(per_node)
                if per_node.isdigit()
                else max(1, world // max(len(node_list), 1)),
                master_addr=node_list[0],
                master_port=_int(env, "MASTER_PORT")
                if "MASTER_PORT" in env
                else slurm_port(slurm_job or "0"),
                launcher="slurm",
                nodes=nodes(len(node_list)),
                node_list=node_list,
                slurm_job_id=slurm_job,
                slurm_step_id=slurm_step,
            )
        )
    return World(
        0, 0, 1, 1, "127.0.0.1", DEFAULT_PORT, "local", 1, (socket.gethostname(),), slurm_job, slurm_step
    )


def _checked(world: World) -> World:
    if world.world_size < 1:
        raise WorldError(f"world size {world.world_size} < 1")
    if not 0 <= world.rank < world.world_size:
        raise WorldError(f"rank {world.rank} is outside the world of {world.world_size}")
    return world
