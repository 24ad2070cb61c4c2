"""A run's lifecycle: run_start, the signals that end it, and a run_stop on every exit path.

Standard library only at import time (see :mod:`honestscale.runners.instrument`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from honestscale.events import EventWriter
from honestscale.runners._sampler import SystemSampler
from honestscale.runners._world import World


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
