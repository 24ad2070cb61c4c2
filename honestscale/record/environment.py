"""What the run ran on: CPU, git commit, filesystem, isolation, CPU affinity and threading knobs, software versions.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import socket
import subprocess
from pathlib import Path

from honestscale.events import THREAD_KNOBS
from honestscale.record.world import World


def cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or None


def git_commit(path: str | os.PathLike[str]) -> str | None:
    """The commit of the git checkout holding ``path`` (with ``-dirty`` if it has local changes)."""
    where = Path(path)
    where = where if where.is_dir() else where.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "") if head else None


def _filesystem(path: str | os.PathLike[str] | None) -> str | None:
    """Type of the filesystem holding ``path`` (the longest mount point of /proc/mounts above it)."""
    if path is None:
        return None
    try:
        target = str(Path(path).resolve())
        best, fstype = "", None
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                mount = parts[1].replace("\\040", " ")
                if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
                    best, fstype = mount, parts[2]
        return fstype
    except OSError:
        return None


def _slurm_exclusive() -> bool | None:
    """Whether the Slurm job has its nodes to itself (OverSubscribe=NO); None outside Slurm or when unknown."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        text = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=3,
                              check=False).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\bOverSubscribe=(\S+)", text)
    return None if not found else found.group(1).upper() == "NO"


def _other_accelerator_processes(device: int | None) -> int | None:
    """Processes other than this one on the accelerator (NVML), or None without a GPU or NVML."""
    if device is None:
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return sum(1 for p in procs if p.pid != os.getpid())
    except Exception:  # no NVML, no driver, no permission: unknown, not zero
        return None


def isolation(
    world: World, data_path: str | os.PathLike[str] | None = None, device: int | None = None
) -> dict[str, object]:
    """How alone this measurement is: an exclusive allocation, the host's load, other processes on the accelerator,
    and the filesystem of the data (a shared one sees other users' I/O). Unknown values are left out."""
    out: dict[str, object] = {
        "exclusive": _slurm_exclusive(),
        "host_load_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "ranks_on_host": world.local_world_size,
        "other_accelerator_processes": _other_accelerator_processes(device),
        "data_filesystem": _filesystem(data_path),
    }
    return {k: v for k, v in out.items() if v is not None}


def cpu_affinity() -> list[int] | None:
    """The CPU ids this process may run on (``os.sched_getaffinity``), ascending; None where it cannot be read."""
    getter = getattr(os, "sched_getaffinity", None)  # Linux; not on macOS
    if getter is None:
        return None
    try:
        return sorted(int(c) for c in getter(0))
    except OSError:
        return None


def launch_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The threading and affinity knobs set in the environment (``events.THREAD_KNOBS``), name -> value as set."""
    env = dict(os.environ) if env is None else env
    return {k: env[k] for k in THREAD_KNOBS if k in env}


def threads(intra_op: int | None, inter_op: int | None) -> dict[str, object]:
    """run_start's threading fields: the threads the framework reported (each runner asks its own framework), the
    CPUs this rank may run on and the knobs its launcher set. Unknown values are left out."""
    cpus = cpu_affinity()
    out: dict[str, object] = {
        "intra_op_threads": intra_op,
        "inter_op_threads": inter_op,
        "cpu_affinity": cpus,
        "cpus_allowed": len(cpus) if cpus else None,
        "launch_env": launch_env(),
    }
    return {k: v for k, v in out.items() if v is not None}


def environment(
    world: World,
    code: str | os.PathLike[str],
    *,
    data_path: str | os.PathLike[str] | None = None,
    device: int | None = None,
) -> dict[str, object]:
    """run_start fields about where and what ran: host, CPU, nodes, launcher, Slurm ids, git commit, OS, isolation."""
    return {
        "isolation": isolation(world, data_path, device),
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "nodes": world.nodes,
        "launcher": world.launcher,
        "slurm_job_id": world.slurm_job_id,
        "slurm_step_id": world.slurm_step_id,
        "git_commit": git_commit(code),
        "system": os.environ.get("SLURM_CLUSTER_NAME")
        or os.environ.get("HONESTSCALE_SYSTEM")
        or socket.gethostname(),
    }


def base_software() -> dict[str, str]:
    return {"python": platform.python_version(), "os": f"{platform.system()} {platform.release()}"}
