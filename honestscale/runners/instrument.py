"""Instrumentation shared by every runner: step timer, system sampler, environment capture, run lifecycle.

Standard library only at import time (framework modules are imported inside the functions
that need them), so the Horovod and MXNet environments can use it as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Protocol

from honestscale.events import EventWriter
from honestscale.runners._world import World


# ----------------------------------------------------------------------------------------------- clocks
class Clock(Protocol):
    """Marks time on the host, or on an accelerator's stream."""

    lagged: bool  # marks can only be read a step later (device clocks)

    def now(self) -> Any: ...

    def seconds(self, start: Any, end: Any) -> float: ...


class HostClock:
    lagged = False

    def now(self) -> float:
        return time.perf_counter()

    def seconds(self, start: Any, end: Any) -> float:
        return float(end - start)


class CudaClock:
    """CUDA events recorded on the current stream: no host synchronisation on the hot path.

    A step's marks are read when the next step ends (its last event has long completed by
    then, so ``synchronize`` on it rarely waits).
    """

    lagged = True

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def now(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0


# ------------------------------------------------------------------------------------------ step timer
class StepTimer:
    """Splits each training step into data, compute, communication and optimizer time.

    Call :meth:`begin` before fetching the batch, :meth:`mark` ``"data"`` once it is on the
    device, ``"compute"`` when backward returns and ``"optimizer"`` after the update, then
    :meth:`end`. ``comm_from`` (a mark of the same clock taken when the last gradient bucket
    was handed to the all-reduce) turns the part of backward spent waiting for gradient
    exchange into communication time; without it communication is recorded as not measured.
    The parts always sum to the step's total.
    """

    PHASES = ("data", "compute", "optimizer")

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or HostClock()
        self._current: dict[str, Any] = {}
        self._pending: list[dict[str, Any]] = []

    def begin(self) -> None:
        self._current = {"begin": self.clock.now()}

    def mark(self, phase: str) -> None:
        self._current[phase] = self.clock.now()

    def end(self, comm_from: Any = None, **fields: Any) -> list[dict[str, Any]]:
        """Close the step; return the timings that are ready (this step's, or the previous one's on a device)."""
        self._current["comm_from"] = comm_from
        self._current["fields"] = fields
        self._pending.append(self._current)
        self._current = {}
        keep = 1 if self.clock.lagged else 0
        ready, self._pending = (
            self._pending[: len(self._pending) - keep],
            self._pending[len(self._pending) - keep :],
        )
        return [self._resolve(step) for step in ready]

    def flush(self) -> list[dict[str, Any]]:
        """Timings of every step not yet returned (call at the end of training)."""
        ready, self._pending = self._pending, []
        return [self._resolve(step) for step in ready]

    def _resolve(self, step: dict[str, Any]) -> dict[str, Any]:
        s = self.clock.seconds
        t_data = s(step["begin"], step["data"])
        t_compute = s(step["data"], step["compute"])
        t_optimizer = s(step["compute"], step["optimizer"])
        out = dict(step["fields"])
        if step["comm_from"] is not None:
            t_comm = min(max(s(step["comm_from"], step["compute"]), 0.0), t_compute)
            out.update(t_comm=t_comm, comm_measured=True)
            t_compute -= t_comm
        else:
            out.update(t_comm=0.0, comm_measured=False)
        out.update(t_data=t_data, t_compute=t_compute, t_optimizer=t_optimizer)
        out["t_total"] = t_data + t_compute + out["t_comm"] + t_optimizer
        return out


# -------------------------------------------------------------------------------------- system sampler
def _read_rss() -> int | None:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _Nvml:
    """NVML through nvidia-ml-py, when a GPU and the library are there."""

    def __init__(self, index: int) -> None:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def sample(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        out: dict[str, Any] = {}
        with contextlib.suppress(n.NVMLError):
            out["accel_util"] = float(n.nvmlDeviceGetUtilizationRates(h).gpu)
        with contextlib.suppress(n.NVMLError):
            out["accel_mem_bytes"] = int(n.nvmlDeviceGetMemoryInfo(h).used)
        with contextlib.suppress(n.NVMLError):
            out["power_w"] = n.nvmlDeviceGetPowerUsage(h) / 1000.0
        with contextlib.suppress(n.NVMLError):
            out["energy_j"] = n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0
        return out


class SystemSampler:
    """A daemon thread writing ``system`` events every ``interval`` seconds.

    Host: CPU use of this process (percent of one core) and its resident memory, and the
    load average; with ``device`` set and NVML available, also the GPU's utilisation,
    memory, power and total-energy counter. Its own cost is measured: when a sample takes
    more than 1 % of the interval, the interval doubles, so the sampler never steals more
    than that from training.
    """

    def __init__(self, writer: EventWriter, interval: float = 1.0, device: int | None = None) -> None:
        self.writer = writer
        self.interval = max(0.05, interval)
        self.device = device
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="honestscale-sampler", daemon=True)
        self._nvml: _Nvml | None = None
        if device is not None:
            try:
                self._nvml = _Nvml(device)
            except Exception:  # no library, no driver: host counters only
                self._nvml = None

    def start(self) -> SystemSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last_cpu, last_wall = time.process_time(), time.perf_counter()
        while not self._stop.wait(self.interval):
            began = time.perf_counter()
            cpu = time.process_time()
            fields: dict[str, Any] = {
                "cpu_percent": 100.0 * (cpu - last_cpu) / max(began - last_wall, 1e-9),
                "rss_bytes": _read_rss(),
                "host_load": os.getloadavg()[0],
            }
            last_cpu, last_wall = cpu, began
            if self._nvml is not None:
                fields["device"] = self.device
                fields.update(self._nvml.sample())
            try:
                self.writer.system(**fields)
            except (OSError, ValueError):
                return  # the writer is closed or the disk is gone: stop sampling, never break training
            if time.perf_counter() - began > 0.01 * self.interval:
                self.interval *= 2


# --------------------------------------------------------------------------------- environment capture
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


def config_hash(config: dict[str, Any]) -> str:
    """A short hash over everything that defines the experiment (not the seed, not the rank)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


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
) -> dict[str, Any]:
    """How alone this measurement is: an exclusive allocation, the host's load, other processes on the accelerator,
    and the filesystem of the data (a shared one sees other users' I/O). Unknown values are left out."""
    out: dict[str, Any] = {
        "exclusive": _slurm_exclusive(),
        "host_load_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "ranks_on_host": world.local_world_size,
        "other_accelerator_processes": _other_accelerator_processes(device),
        "data_filesystem": _filesystem(data_path),
    }
    return {k: v for k, v in out.items() if v is not None}


def environment(
    world: World,
    code: str | os.PathLike[str],
    *,
    data_path: str | os.PathLike[str] | None = None,
    device: int | None = None,
) -> dict[str, Any]:
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


# ------------------------------------------------------------------------------------------ lifecycle
class RunTerminated(Exception):
    """SIGTERM: Slurm's time limit (or an operator) ended the run."""


class PeerFailed(Exception):
    """SIGUSR1 from the launcher: another rank of the run failed, this one is being stopped."""


class TargetNotReached(Exception):
    """Training ended (epochs, samples or time spent) without reaching the target accuracy."""


def _raise(exc: type[Exception], what: str, stopping: list[bool]) -> Callable[[int, FrameType | None], None]:
    """A handler raising ``exc`` once: after the first stop (signal or end of the block), later signals are
    ignored, so a second one (the launcher's SIGUSR1 after a peer's SIGTERM exit) cannot interrupt the unwinding
    or the start of ``__exit__`` and lose the run_stop."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stopping[0]:
            return
        stopping[0] = True
        raise exc(what)

    return handler


def _terminated_status(what: str) -> tuple[str, str]:
    """SIGTERM under Slurm: ask the controller whether the job hit its time limit or was cancelled."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job and os.environ.get("HOROVOD_RANK"):
        # horovodrun terminates every rank when one fails (or when it is itself stopped)
        return "failed", "SIGTERM from horovodrun: another rank failed, or the launch was stopped"
    if not job:
        return "timeout", what
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    ref = f"{array}_{task}" if array and task else job
    try:
        text = subprocess.run(["scontrol", "-o", "show", "job", ref], capture_output=True, text=True, timeout=3,
                              check=False).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        text = ""
    fields = dict(re.findall(r"\b(JobState|RunTime|TimeLimit)=(\S+)", text))
    state = fields.get("JobState", "").upper()
    run_s, limit_s = _slurm_seconds(fields.get("RunTime")), _slurm_seconds(fields.get("TimeLimit"))
    if state.startswith("CANCELLED") or (
        not state.startswith("TIMEOUT") and run_s is not None and limit_s is not None and run_s < limit_s
    ):
        return (
            "cancelled",
            f"SIGTERM: Slurm job {ref} was cancelled before its time limit ({state or 'state unknown'})",
        )
    if state:
        return "timeout", f"SIGTERM: Slurm job {ref} reached its time limit ({state})"
    return "timeout", what


def _slurm_seconds(text: str | None) -> int | None:
    """Slurm durations: [D-]HH:MM:SS, MM:SS or UNLIMITED."""
    if not text or not re.fullmatch(r"(\d+-)?\d+(:\d+){0,2}", text):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days) if days else 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


class RunRecorder:
    """One rank's run from ``run_start`` to a ``run_stop`` on every exit path.

    * leaving the block normally writes ``success`` unless :meth:`stop` wrote something else;
    * SIGTERM (Slurm's time limit, scancel) writes ``timeout``;
    * SIGUSR1 (``honestscale run`` stopping the other ranks after one failed) writes ``failed``;
    * Ctrl-C writes ``cancelled``; :class:`TargetNotReached` writes ``aborted``;
    * any other exception writes ``failed`` with the exception as reason.

    The exception then propagates, so the process still exits non-zero.
    """

    def __init__(self, out: str | os.PathLike[str], run_id: str, world: World, *, sample_interval: float = 1.0,
                 device: int | None = None) -> None:  # fmt: skip
        self.writer = EventWriter(out, run_id, world.rank)
        self.world = world
        self.sampler = SystemSampler(self.writer, sample_interval, device) if sample_interval > 0 else None
        self._old: dict[int, Any] = {}
        self._stopping = [False]  # shared with the signal handlers

    def __enter__(self) -> RunRecorder:
        if threading.current_thread() is threading.main_thread():
            for sig, exc, what in (
                (signal.SIGTERM, RunTerminated, "SIGTERM: time limit reached or run cancelled"),
                (signal.SIGUSR1, PeerFailed, "stopped by the launcher because another rank failed"),
            ):
                self._old[sig] = signal.signal(sig, _raise(exc, what, self._stopping))
        return self

    def start(self, **fields: Any) -> None:
        self.writer.run_start(**fields)
        if self.sampler is not None:
            self.sampler.start()

    def stop(self, status: str, reason: str | None = None) -> None:
        if not self.writer.stopped:
            self.writer.run_stop(status, reason)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping[0] = True  # first: from here no handler raises
        main = threading.current_thread() is threading.main_thread()
        if main:  # a second signal must not cut the run_stop in half
            for sig in self._old:
                signal.signal(sig, signal.SIG_IGN)
        try:
            if self.sampler is not None:
                self.sampler.stop()
            if exc is None:
                self.stop("success")
            elif isinstance(exc, RunTerminated):
                self.stop(*_terminated_status(str(exc)))
            elif isinstance(exc, KeyboardInterrupt):
                self.stop("cancelled", "interrupted (SIGINT)")
            elif isinstance(exc, TargetNotReached):
                self.stop("aborted", str(exc))
            else:
                self.stop("failed", f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            self.writer.close()
            for sig, old in self._old.items():
                signal.signal(sig, old)


# ------------------------------------------------------------------------------------- runner plumbing
EXIT_CODES: dict[type[BaseException], int] = {
    RunTerminated: 143,
    PeerFailed: 1,
    TargetNotReached: 3,
    KeyboardInterrupt: 130,
}


def add_training_args(parser: Any, *, sample_budget: bool = True) -> tuple[Any, Any]:
    """The training options every runner takes with the same name, default and meaning (a cross-framework
    campaign may use only options every runner in it accepts); returns the "how" and "when to stop" groups for
    the runner's own options. ``sample_budget``: the runner can stop after N samples (--max-samples) and
    evaluate every N epochs (--eval-every)."""
    how = parser.add_argument_group("how")
    how.add_argument("--batch-size", type=int, default=64, help="GLOBAL batch, split evenly over the workers")
    how.add_argument("--lr", type=float, default=0.1)
    how.add_argument("--momentum", type=float, default=0.9)
    how.add_argument("--seed", type=int, default=0)
    how.add_argument("--warmup-steps", type=int, default=3, help="first steps flagged as warm-up (not timed)")
    stop = parser.add_argument_group(
        "when to stop (the first criterion given decides; --epochs is also the cap)"
    )
    stop.add_argument("--epochs", type=int, default=10)
    stop.add_argument("--target-accuracy", type=float, help="stop when validation accuracy reaches this")
    if sample_budget:
        stop.add_argument(
            "--max-samples", type=int, help="stop after this many training samples (all workers)"
        )
        stop.add_argument(
            "--eval-every", type=int, default=1, help="evaluate train and validation every N epochs"
        )
    return how, stop


def add_recording_args(parser: Any) -> None:
    """The options every runner takes to name and file its run (argparse)."""
    g = parser.add_argument_group("recording")
    g.add_argument("--out", type=Path, required=True, help="folder for <run_id>/events-rank<N>.jsonl")
    g.add_argument("--run-id", help="the same on every rank (honestscale run passes it)")
    g.add_argument("--campaign")
    g.add_argument("--name")
    g.add_argument("--purpose", choices=["final", "tuning", "baseline", "smoke"], default="final")
    g.add_argument("--tuning-study")
    g.add_argument("--tuning-trial")
    g.add_argument("--scaling", choices=["strong", "weak", "none"])
    g.add_argument(
        "--sample-interval", type=float, default=1.0, help="seconds between system samples (0: off)"
    )


RECORDING_KEYS = (
    "out",
    "run_id",
    "campaign",
    "name",
    "purpose",
    "tuning_study",
    "tuning_trial",
    "sample_interval",
)


def run_entry(main: Callable[[], int]) -> None:
    """A runner's entry point: exit 0 on success, 3 target not reached, 143 SIGTERM, 130 Ctrl-C, 1 failure.

    The process ends with ``os._exit`` once every event is written (each was a complete write
    already): tearing down gloo/NCCL/gRPC groups at interpreter exit races with the peers and can
    abort a run that succeeded, so they are left to the operating system.
    """
    import sys
    import traceback

    try:
        code = main()
    except tuple(EXIT_CODES) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        code = EXIT_CODES[type(exc)]
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
