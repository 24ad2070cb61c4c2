"""How a run ends: the signals that stop it, and the run_stop status each exit path writes.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from types import FrameType


class RunTerminated(Exception):
    """SIGTERM: Slurm's time limit (or an operator) ended the run."""


class PeerFailed(Exception):
    """SIGUSR1 from the launcher: another rank of the run failed, this one is being stopped."""


class TargetNotReached(Exception):
    """Training ended (epochs, samples or time spent) without reaching the target accuracy."""


def raising_handler(
    exc: type[Exception], what: str, stopping: list[bool]
) -> Callable[[int, FrameType | None], None]:
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
    if not job and os.environ.get("TORCHELASTIC_RUN_ID"):
        # torchrun terminates the other workers when one fails (or when it is itself stopped)
        return "failed", "SIGTERM from torchrun: another rank failed, or the launch was stopped"
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


def stop_status(exc: BaseException | None) -> tuple[str, str | None]:
    """The run_stop status and reason for leaving the run by ``exc`` (None: it ended normally).

    SIGTERM: ``timeout`` (or ``cancelled`` when Slurm says the job was cancelled before its limit); SIGUSR1 from
    the launcher and any other exception: ``failed`` with the exception as reason; Ctrl-C: ``cancelled``;
    :class:`TargetNotReached`: ``aborted``.
    """
    if exc is None or (isinstance(exc, SystemExit) and exc.code in (0, None)):
        return "success", None
    if isinstance(exc, RunTerminated):
        return _terminated_status(str(exc))
    if isinstance(exc, KeyboardInterrupt):
        return "cancelled", "interrupted (SIGINT)"
    if isinstance(exc, TargetNotReached):
        return "aborted", str(exc)
    return "failed", f"{type(exc).__name__}: {exc}"[:2000]
