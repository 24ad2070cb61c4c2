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
from collections.abc import Callable, Mapping
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


@dataclass(frozen=True)
class _Job:
    """What every launcher may read: the environment and the Slurm job (if any) the process runs in."""

    env: Mapping[str, str]
    slurm_job: str | None
    slurm_step: str | None
    nodes_env: str | None
    node_list: tuple[str, ...]

    @classmethod
    def of(cls, env: Mapping[str, str]) -> _Job:
        slurm_job = env.get("SLURM_JOB_ID")
        if env.get("SLURM_ARRAY_JOB_ID") and env.get(
            "SLURM_ARRAY_TASK_ID"
        ):  # an array task: name it as squeue does
            slurm_job = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
        return cls(
            env=env,
            slurm_job=slurm_job,
            slurm_step=env.get("SLURM_STEP_ID"),
            nodes_env=env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES"),
            node_list=tuple(expand_hostlist(env["SLURM_JOB_NODELIST"]))
            if env.get("SLURM_JOB_NODELIST")
            else (),
        )

    def number(self, name: str) -> int:
        return _int(self.env, name)

    def number_or(self, name: str, default: int) -> int:
        return _int(self.env, name) if name in self.env else default

    def host(self, addr: str | None) -> str:
        """``addr`` when set, else the first host of the Slurm job, else this machine."""
        return addr or (self.node_list[0] if self.node_list else "127.0.0.1")

    def nodes(self, default: int) -> int:
        if self.nodes_env and self.nodes_env.isdigit():
            return int(self.nodes_env)
        return len(self.node_list) or default

    def spread(self, world: int, local_world: int) -> int:
        """The node count, ``world`` ranks at ``local_world`` a node unless Slurm says otherwise."""
        return self.nodes(max(1, -(-world // max(local_world, 1))))


@dataclass(frozen=True)
class _Fields:
    """What a launcher knows of the process; ``hosts`` None stands for the Slurm job's node list."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str
    nodes: int
    hosts: tuple[str, ...] | None = None


def _torchrun(job: _Job) -> _Fields:
    world = job.number("WORLD_SIZE")
    local_world = job.number_or("LOCAL_WORLD_SIZE", world)
    rank = job.number("RANK")
    return _Fields(
        rank=rank,
        local_rank=job.number_or("LOCAL_RANK", rank),
        world_size=world,
        local_world_size=local_world,
        master_addr=job.env.get("MASTER_ADDR", "127.0.0.1"),
        master_port=job.number_or("MASTER_PORT", DEFAULT_PORT),
        launcher=job.env.get("HONESTSCALE_LAUNCHER", "torchrun"),
        nodes=job.spread(world, local_world),
    )


def _counted(job: _Job, prefix: str, size: str, addr: str, launcher: str) -> _Fields:
    """Horovod's and Open MPI's shape: ``{prefix}RANK``, ``{prefix}LOCAL_RANK``, ``{prefix}{size}``, ..."""
    world = job.number(f"{prefix}{size}")
    local_world = job.number_or(f"{prefix}LOCAL_{size}", world)
    return _Fields(
        rank=job.number(f"{prefix}RANK"),
        local_rank=job.number_or(f"{prefix}LOCAL_RANK", 0),
        world_size=world,
        local_world_size=local_world,
        master_addr=job.host(job.env.get(addr)),
        master_port=job.number_or("MASTER_PORT", DEFAULT_PORT),
        launcher=launcher,
        nodes=job.spread(world, local_world),
    )


def _horovod(job: _Job) -> _Fields:
    return _counted(job, "HOROVOD_", "SIZE", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "horovodrun")


def _open_mpi(job: _Job) -> _Fields:
    return _counted(job, "OMPI_COMM_WORLD_", "SIZE", "MASTER_ADDR", "mpirun")


def _pmi(job: _Job) -> _Fields:
    world = job.number("PMI_SIZE")
    return _Fields(
        rank=job.number("PMI_RANK"),
        local_rank=job.number_or("MPI_LOCALRANKID", 0),
        world_size=world,
        local_world_size=job.number_or("MPI_LOCALNRANKS", world),
        master_addr=job.host(job.env.get("MASTER_ADDR")),
        master_port=slurm_port(job.slurm_job) if job.slurm_job else DEFAULT_PORT,
        launcher="slurm" if job.slurm_job else "mpirun",
        nodes=job.nodes(1),
    )


def _srun(job: _Job) -> _Fields:
    if not job.node_list:
        raise WorldError("SLURM_PROCID is set but SLURM_JOB_NODELIST is not: run the ranks with srun")
    world = job.number("SLURM_NTASKS")
    per_node = job.env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
    return _Fields(
        rank=job.number("SLURM_PROCID"),
        local_rank=job.number_or("SLURM_LOCALID", 0),
        world_size=world,
        local_world_size=int(per_node) if per_node.isdigit() else max(1, world // max(len(job.node_list), 1)),
        master_addr=job.node_list[0],
        master_port=job.number_or("MASTER_PORT", slurm_port(job.slurm_job or "0")),
        launcher="slurm",
        nodes=job.nodes(len(job.node_list)),
    )


def _local(job: _Job) -> _Fields:
    return _Fields(0, 0, 1, 1, "127.0.0.1", DEFAULT_PORT, "local", 1, hosts=(socket.gethostname(),))


@dataclass(frozen=True)
class _Launcher:
    """One row of the table: the launcher started the process when every variable of ``needs`` is set."""

    name: str
    needs: tuple[str, ...]
    read: Callable[[_Job], _Fields]


# The precedence of the module's docstring, first row first; the last row needs nothing and always matches.
_LAUNCHERS: tuple[_Launcher, ...] = (
    _Launcher("torchrun", ("RANK", "WORLD_SIZE"), _torchrun),
    _Launcher("horovodrun", ("HOROVOD_RANK", "HOROVOD_SIZE"), _horovod),
    _Launcher("open-mpi", ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), _open_mpi),
    _Launcher("pmi", ("PMI_RANK", "PMI_SIZE"), _pmi),
    _Launcher("slurm", ("SLURM_PROCID", "SLURM_NTASKS"), _srun),
    _Launcher("local", (), _local),
)


def discover(env: Mapping[str, str] | None = None) -> World:
    """This process's place in the job, read from ``env`` (default ``os.environ``) by the first launcher of
    ``_LAUNCHERS`` whose variables are all set; ``WorldError`` names a variable that is inconsistent."""
    job = _Job.of(os.environ if env is None else env)
    row = next(row for row in _LAUNCHERS if all(name in job.env for name in row.needs))
    f = row.read(job)
    return _checked(
        World(
            rank=f.rank,
            local_rank=f.local_rank,
            world_size=f.world_size,
            local_world_size=f.local_world_size,
            master_addr=f.master_addr,
            master_port=f.master_port,
            launcher=f.launcher,
            nodes=f.nodes,
            node_list=job.node_list if f.hosts is None else f.hosts,
            slurm_job_id=job.slurm_job,
            slurm_step_id=job.slurm_step,
        )
    )


def _checked(world: World) -> World:
    if world.world_size < 1:
        raise WorldError(f"world size {world.world_size} < 1")
    if not 0 <= world.rank < world.world_size:
        raise WorldError(f"rank {world.rank} is outside the world of {world.world_size}")
    return world
