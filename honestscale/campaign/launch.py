"""The local launcher: N ranks of a runner on this machine, like torchrun, with honest bookkeeping.

Each rank gets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` (a free
port) and the same ``--run-id``; its output is prefixed with ``[rank N]``. CPU threads are split
between the ranks (``OMP_NUM_THREADS``) unless the caller set them (``HONESTSCALE_LAUNCHER_SET`` says which it
set; every rank records it with the threads it ran in run_start). When a rank fails, the
others get SIGUSR1 (recorded as ``failed``: a peer failed) and, after a grace period, SIGKILL.
SIGINT and SIGTERM are passed on to every rank. The exit code is that of the first rank that
failed, or 0.

Horovod's frameworks (``horovod-torch``, ``horovod-tf``) are started through Horovod's own launcher,
``horovodrun -np N -H localhost:N --gloo``, from their environment; it sets ``HOROVOD_RANK``... for
each rank and prefixes their output with ``[1,rank]``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from honestscale.runners import usermodel

if TYPE_CHECKING:
    from honestscale.collector import Summary
    from honestscale.store import Connection

# framework -> python module of its runner, and the arguments that select the framework's flavour
RUNNERS = {
    "torch": "honestscale.runners.torch_ddp",
    "tensorflow": "honestscale.runners.tf_keras",
    "horovod-torch": "honestscale.runners.torch_ddp",
    "horovod-tf": "honestscale.runners.tf_keras",
    "mxnet": "honestscale.runners.mxnet_gluon",
}
RUNNER_ARGS: dict[str, tuple[str, ...]] = {
    "horovod-torch": ("--distributed", "horovod"),
    "horovod-tf": ("--distributed", "horovod"),
}
# Horovod's ranks are started by its own launcher, horovodrun (Gloo), found beside the environment's python
HOROVOD = ("horovod-torch", "horovod-tf")
HOROVOD_MODULE = {"horovod-torch": "horovod.torch", "horovod-tf": "horovod.tensorflow"}
_HVD_ENV = ("HONESTSCALE_HVD_PYTHON", ".venv-hvd")
# framework -> (environment variable naming its python, default virtual environment folder); None: this python
ENVIRONMENTS: dict[str, tuple[str, str] | None] = {
    "torch": None,
    "tensorflow": ("HONESTSCALE_TF_PYTHON", ".venv-tf"),
    "horovod-torch": _HVD_ENV,
    "horovod-tf": _HVD_ENV,
    "mxnet": ("HONESTSCALE_MX_PYTHON", ".venv-mx"),
}
_HVD_INSTALL = (
    "bash scripts/build-horovod-env .venv-hvd (Horovod 0.28.1 with torch 2.13 and TensorFlow 2.15; ~8 min)"
)
# framework -> (modules the runner needs, how to install them)
NEEDS = {
    "torch": (
        ("torch", "sklearn"),
        "pip install torch==2.13.0 && pip install -e '.[torch]' (CPU wheel first)",
    ),
    "tensorflow": (
        ("tensorflow", "tf_keras", "sklearn", "honestscale"),
        "python3 -m venv .venv-tf && .venv-tf/bin/pip install tensorflow-cpu tf-keras tensorboard scikit-learn "
        "&& .venv-tf/bin/pip install --no-deps -e .",
    ),
    # the compiled extension, not the package folder: Horovod installs every front end's Python code
    "horovod-torch": (("torch", "horovod.torch.mpi_lib_v2", "sklearn", "honestscale"), _HVD_INSTALL),
    "horovod-tf": (("tensorflow", "horovod.tensorflow.mpi_lib", "sklearn", "honestscale"), _HVD_INSTALL),
    "mxnet": (
        ("mxnet", "sklearn", "honestscale"),
        "python3 -m venv .venv-mx && .venv-mx/bin/pip install mxnet==1.9.1 'numpy<1.24' scikit-learn "
        "&& .venv-mx/bin/pip install --no-deps -e .",
    ),
}


def runner_command(framework: str) -> list[str]:
    """``-m module [flavour arguments]``: what follows the python that runs one rank of ``framework``."""
    return ["-m", RUNNERS[framework], *RUNNER_ARGS.get(framework, ())]


def python_for(framework: str) -> str:
    """The interpreter of a framework's environment: $HONESTSCALE_<FW>_PYTHON, else ./.venv-<fw>, else
    .venv-<fw> in the honestscale checkout; torch runs in honestscale's own environment."""
    spec = ENVIRONMENTS.get(framework)
    if spec is None:
        return sys.executable
    var, folder = spec
    if os.environ.get(var):
        return os.environ[var]
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = root / folder / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    raise LaunchError(
        f"no {framework} environment: set {var} to its python, or create ./{folder}: {NEEDS[framework][1]}"
    )


GRACE_S = 15.0


class LaunchError(ValueError):
    """The launch cannot start: the message names the option and the fix."""


class WrongFamily(LaunchError):
    """The user's model is written for another framework family than the one asked for."""


@dataclass
class LaunchResult:
    run_id: str
    exit_code: int
    codes: list[int]
    stopped_by: int | None = None  # SIGINT or SIGTERM passed on to the ranks: the caller stops too


def check_installed(framework: str, python: str = sys.executable) -> None:
    """Refuse, naming the packages and the install command, when ``python`` lacks what the runner needs."""
    if framework not in RUNNERS:
        raise LaunchError(f"--framework {framework!r}: runners available here: {', '.join(RUNNERS)}")
    modules, install = NEEDS[framework]
    code = (
        "import importlib.util, sys\n"
        "def missing(m):\n"
        "    try:\n"
        "        return importlib.util.find_spec(m) is None\n"
        "    except ImportError:\n"
        "        return True\n"
        f"sys.stdout.write(','.join(m for m in {list(modules)!r} if missing(m)))"
    )
    try:
        found = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, check=False, timeout=60
        ).stdout
    except OSError as exc:
        raise LaunchError(f"cannot run {python}: {exc.strerror}") from None
    if found:
        raise LaunchError(
            f"the {framework} runner needs {found.replace(',', ', ')}, not installed for {python}: {install}"
        )


def check_user_files(framework: str, python: str, runner_args: Sequence[str]) -> None:
    """A user's ``--model FILE.py:FUNC`` (or ``--dataset``) is imported, built and run on one batch in the
    framework's environment before any worker starts; a problem is refused with the file, function and fix."""
    model = runner_option(runner_args, "--model")
    if model is None or not usermodel.is_spec(model):
        return  # a built-in model (on a user dataset too: the runner checks the dataset when it loads it)
    cmd = [python, "-m", "honestscale.runners.usermodel", "--framework", framework, "--model", model,
           "--dataset", runner_option(runner_args, "--dataset") or "digits"]  # fmt: skip
    if data_path := runner_option(runner_args, "--data-path"):
        cmd += ["--data-path", data_path]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600, env=env)
    lines = result.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    if result.returncode != 0 or "error" in answer:
        error = WrongFamily if answer.get("wrong_family") else LaunchError
        raise error(answer.get("error") or f"checking {model} failed: {result.stderr.strip()[-2000:]}")


def horovodrun_for(python: str) -> str:
    """Horovod's launcher, installed beside the environment's python."""
    return str(Path(python).parent / "horovodrun")


def runner_option(args: Sequence[str], name: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` among a runner's arguments (the last wins)."""
    found = None
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(name + "="):
            found = a.split("=", 1)[1]
    return found


EPHEMERAL = "/proc/sys/net/ipv4/ip_local_port_range"


def _listening_range() -> range:
    """Ports outside the kernel's ephemeral range (below it, or above it where it starts low), where no outgoing
    connection takes a port: 10000 up to its start, as torchrun's 29500 and Slurm's ports are."""
    try:
        low, high = (int(x) for x in Path(EPHEMERAL).read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(10000, low) if low > 11000 else range(high + 1, 65536)


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on every address now, outside the ephemeral range (each socket is held until all
    are chosen, so none repeats).

    Free on the wildcard address: TensorFlow's gRPC servers bind 0.0.0.0, which fails where another process holds
    the port on any address. Outside the ephemeral range: a port the kernel gave as free (``bind(port 0)``) is one it
    also gives to outgoing connections, and a rank that connects to a peer not yet listening on such a port can take
    it itself (TCP connects a socket to itself when its source port is the destination). A CI run failed on an
    unchecked ``MASTER_PORT+1``: "Could not start gRPC server"."""
    rng = random.SystemRandom()
    ports = _listening_range()
    socks: list[socket.socket] = []
    try:
        for _ in range(50 * n):
            if len(socks) == n:
                break
            s = socket.socket()
            try:
                s.bind(("", rng.choice(ports)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < n:
            raise LaunchError(
                f"no {n} free ports found in {ports.start}-{ports.stop - 1}: close what holds them"
            )
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _pump(stream: TextIO, prefix: str, sink: TextIO) -> None:
    for line in stream:
        sink.write(f"{prefix}{line}")
        sink.flush()


def thread_split(workers: int, env: dict[str, str], cpus: int | None = None) -> dict[str, str]:
    """The threading knobs the launcher sets for ``workers`` ranks on this machine: the CPUs split between them
    (``OMP_NUM_THREADS``), unless the caller set it; and ``HONESTSCALE_LAUNCHER_SET`` naming what it set, so each
    rank's run_start (``launch_env``) tells the launcher's split from the caller's choice. With 2 CPUs, 1 worker
    gets 2 threads and each of 2 workers 1: the threads per worker differ between the points of a series, which
    the rules about its speedups name (HS209)."""
    if "OMP_NUM_THREADS" in env:
        return {"HONESTSCALE_LAUNCHER_SET": ""}
    if cpus is None:  # the CPUs this process may run on (a cgroup or taskset may allow fewer than it has)
        getter = getattr(os, "sched_getaffinity", None)
        cpus = len(getter(0)) if getter is not None else (os.cpu_count() or 1)
    return {"OMP_NUM_THREADS": str(max(1, cpus // workers)), "HONESTSCALE_LAUNCHER_SET": "OMP_NUM_THREADS"}


def launch(
    framework: str,
    workers: int,
    runner_args: Sequence[str],
    run_id: str,
    *,
    python: str | None = None,
    quiet: bool = False,
    sink: TextIO | None = None,
    on_stop: Callable[[int], None] | None = None,
) -> LaunchResult:
    if framework not in RUNNERS:
        raise LaunchError(f"--framework {framework!r}: runners available here: {', '.join(RUNNERS)}")
    if workers < 1:
        raise LaunchError(f"--workers {workers}: need at least 1")
    python = python or python_for(framework)
    check_installed(framework, python)
    check_user_files(framework, python, runner_args)
    rank_cmd = [python, *runner_command(framework), *runner_args, "--run-id", run_id]
    jobs = _jobs(framework, workers, python, rank_cmd)
    procs, pumps = _start(jobs, quiet, sink or sys.stdout)
    ranks = _Ranks(procs, on_stop)
    old = {s: signal.signal(s, ranks.forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        ranks.watch()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if ranks.stopped:  # the ranks ended before the loop looked: told now, before the run lands
        ranks.tell_stopped()
    for t in pumps:
        t.join(timeout=5)
    codes = [p.returncode for p in procs]
    first_failure = ranks.first_failure
    if first_failure is None:
        first_failure = next((c for c in codes if c != 0), 0)
    return LaunchResult(run_id, _exit_code(first_failure), codes, ranks.stopped[0] if ranks.stopped else None)


Job = tuple[list[str], dict[str, str], str]  # a process's command, environment and output prefix


def _jobs(framework: str, workers: int, python: str, rank_cmd: list[str]) -> list[Job]:
    """The processes that start the ranks: horovodrun for Horovod's frameworks (it starts them, Gloo rendezvous,
    and prefixes their output with [1,rank]), else one per rank with torchrun's variables."""
    base = dict(os.environ)
    base.update(thread_split(workers, base))
    base.setdefault("PYTHONUNBUFFERED", "1")
    if framework in HOROVOD:
        horovodrun = horovodrun_for(python)
        if not Path(horovodrun).exists():
            raise LaunchError(f"{horovodrun} not found: {NEEDS[framework][1]}")
        cmd = [horovodrun, "-np", str(workers), "-H", f"localhost:{workers}", "--gloo", *rank_cmd]
        return [(cmd, base | {"TF_CPP_MIN_LOG_LEVEL": base.get("TF_CPP_MIN_LOG_LEVEL", "2")}, "")]
    port, *worker_ports = free_ports(workers + 1)  # TensorFlow's gRPC servers take one each: never port+1..
    # the launcher makes the cluster: an inherited TF_CONFIG would give every rank one task and its port
    base.pop("TF_CONFIG", None)
    jobs = []
    for rank in range(workers):
        env = base | {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(workers),
            "LOCAL_WORLD_SIZE": str(workers),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "HONESTSCALE_WORKER_PORTS": ",".join(map(str, worker_ports)),
            "HONESTSCALE_LAUNCHER": "local",
        }
        jobs.append((rank_cmd, env, f"[rank {rank}] "))
    return jobs


def _start(
    jobs: list[Job], quiet: bool, sink: TextIO
) -> tuple[list[subprocess.Popen[str]], list[threading.Thread]]:
    """Start every job, each in a session of its own (our signal handling decides what reaches the ranks), its
    output pumped to ``sink`` with its prefix."""
    procs: list[subprocess.Popen[str]] = []
    pumps: list[threading.Thread] = []
    for cmd, env, prefix in jobs:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        procs.append(proc)
        if proc.stdout is not None:
            t = threading.Thread(target=_pump, args=(proc.stdout, "" if quiet else prefix, sink))
            t.daemon = True
            t.start()
            pumps.append(t)
    return procs, pumps


class _Ranks:
    """The running ranks: signals passed on to them, the first failure told to the others (SIGUSR1), and, past
    the grace period after it, the ones left killed."""

    def __init__(self, procs: list[subprocess.Popen[str]], on_stop: Callable[[int], None] | None) -> None:
        self.procs = procs
        self.on_stop = on_stop
        self.stopped: list[int] = []  # a signal we passed on: ranks exiting on it are stopping, not failing
        self.told: list[int] = []
        self.first_failure: int | None = None

    def tell_stopped(self) -> None:
        """``on_stop`` once, with the first signal passed on."""
        if self.on_stop is not None and not self.told:
            self.told.append(self.stopped[0])
            self.on_stop(self.stopped[0])

    def forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopped.append(signum)
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signum)

    def watch(self) -> None:
        """Until every rank has ended."""
        deadline: float | None = None
        while any(p.poll() is None for p in self.procs):
            if self.stopped:  # outside the handler: the user knows it was heard
                self.tell_stopped()
            if self.first_failure is None and self._failed():
                deadline = time.monotonic() + GRACE_S
            if deadline is not None and time.monotonic() > deadline:
                for p in self.procs:
                    if p.poll() is None:
                        p.kill()
            time.sleep(0.05)

    def _failed(self) -> bool:
        """A rank failed: the first failure is kept and the others are told."""
        code = next((c for p in self.procs if (c := p.poll()) not in (None, 0)), None)
        if code is None:
            return False
        self.first_failure = code
        for other in self.procs:
            # SIGUSR1 says "a peer failed"; after our own SIGTERM/SIGINT the others have theirs already (a rank
            # busy in a collective may handle the later SIGUSR1 first)
            if other.poll() is None and not self.stopped:
                other.send_signal(signal.SIGUSR1)
        return True


def _exit_code(code: int) -> int:
    """Negative Popen codes (killed by signal N) as a shell reports them: 128 + N."""
    return 128 - code if code < 0 else code


def run_id_for(runner_args: Sequence[str], workers: int) -> str:
    """A run id for ``honestscale run`` where none is given: the run's --name (else its model's label), the workers
    and the time it starts."""
    name = runner_option(runner_args, "--name") or usermodel.label(
        runner_option(runner_args, "--model") or "run"
    )
    return f"{name}-{workers}w-{time.strftime('%Y%m%dT%H%M%S')}"


def ingest_folder(con: Connection, folder: Path) -> Summary:
    """The event files of one run's folder landed in the store (``honestscale run --ingest``)."""
    from honestscale.collector import Ingester, discover

    return Ingester(con).ingest(discover([str(folder)]).sources)


def out_dir(runner_args: Sequence[str]) -> Path | None:
    """The ``--out`` folder among the runner's arguments."""
    found = runner_option(runner_args, "--out")
    return Path(found) if found else None
