"""Running a campaign on this machine: each stage's runs in turn, each ingested as soon as it ends.

Run ids are stable: a run that already ended is kept, not run again (unless ``rerun``). What happens is
told to a :class:`Watcher` (the CLI draws progress from it); the store is opened through ``open_store``
only while a run's events land, so `runs` and `show` can read it in between. One ``campaign run`` holds a
spec's output folder at a time (:func:`hold`). Ctrl-C (or SIGTERM) stops the runs in progress (their ranks record
``cancelled``), lands what they wrote and starts nothing more (:class:`Stopped`).
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from honestscale.campaign import launch, repeat
from honestscale.campaign.spec import RunPlan, Spec, finished
from honestscale.campaign.stages import Best, Stage, stages
from honestscale.collector import Ingester, discover
from honestscale.errors import HonestscaleError
from honestscale.store import Connection


@dataclass(frozen=True)
class Done:
    plan: RunPlan
    ran: bool  # False: it had already ended and was kept
    exit_code: int | None  # None when it was not run
    seconds: float
    log: Path | None


class Stopped(HonestscaleError):
    """Ctrl-C or SIGTERM stopped the campaign: the runs in progress were stopped and landed, no other started."""

    exit_code = 130


LOCK_NAME = ".honestscale-campaign.lock"


@contextmanager
def hold(spec: Spec) -> Iterator[None]:
    """Hold the spec's output folder for this process, or refuse naming the process that holds it.

    Two ``campaign run`` of one spec would run every run twice into the same event files. The lock is an
    ``flock`` on a file in the folder: the kernel releases it when its holder dies, so a killed run never
    leaves a stale lock behind.
    """
    spec.out.mkdir(parents=True, exist_ok=True)
    path = spec.out / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            raise HonestscaleError(
                f"campaign {spec.name!r} is already running: process {holder} holds {path}",
                "wait for it to end (or stop it with Ctrl-C), then run the spec again: runs that ended are kept",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} ({spec.path.resolve()})".encode(), 0)
        yield
    finally:
        os.close(fd)


class Watcher(Protocol):
    def stage(self, stage: Stage) -> AbstractContextManager[None]: ...

    def started(self, plan: RunPlan) -> None: ...

    def finished(self, done: Done) -> None: ...

    def stopping(self, plan: RunPlan, signum: int) -> None:
        """Ctrl-C (or SIGTERM) reached the ranks of ``plan``: said at once, before they end and the run lands."""


def check_environments(spec: Spec) -> None:
    """Every framework's environment, before the first run starts."""
    for framework in spec.frameworks():
        try:
            launch.check_installed(framework, launch.python_for(framework))
        except launch.LaunchError as exc:
            raise HonestscaleError(
                f"{spec.path}: {exc}", "create that environment, or drop the framework"
            ) from None


def run(
    spec: Spec,
    *,
    rerun: bool,
    open_store: Callable[[], AbstractContextManager[Connection]],
    best: Callable[[], Best],
    watcher: Watcher,
) -> list[str]:
    """Every stage of ``spec`` on this machine (after :func:`check_environments`); the runs that did not succeed.

    With ``spec.until_ci``, rounds of one more repetition per point follow the final runs until every point's
    interval is narrow enough or its runs reach the cap (:mod:`honestscale.campaign.repeat`).
    """
    spec.out.mkdir(parents=True, exist_ok=True)
    not_ok: list[str] = []
    finals: list[RunPlan] = []
    try:
        for stage in stages(spec, best):
            finals = stage.plans
            _run_stage(spec, stage, rerun, open_store, watcher, not_ok)
        for n in itertools.count(1):
            with open_store() as con:
                more = repeat.next_round(con, spec, finals)
            if not more:
                break
            label = f"more repetitions, round {n} (until the 95 % interval is within {100 * (spec.until_ci or 0):g} %)"
            _run_stage(spec, Stage("more repetitions", label, more), rerun, open_store, watcher, not_ok)
    except KeyboardInterrupt:  # between runs (while one lands, say): nothing more starts
        raise Stopped(
            f"campaign {spec.name!r} stopped by Ctrl-C: runs that ended have landed, no other was started",
            "run the spec again to do the rest: runs that ended are kept",
        ) from None
    return not_ok


def _run_stage(
    spec: Spec,
    stage: Stage,
    rerun: bool,
    open_store: Callable[[], AbstractContextManager[Connection]],
    watcher: Watcher,
    not_ok: list[str],
) -> None:
    """Each run of the stage in turn (kept when it already ended), ingested as soon as it ends."""
    with watcher.stage(stage):
        for plan in stage.plans:
            watcher.started(plan)
            t0 = time.monotonic()
            ran = rerun or not finished(spec.out, plan.run_id)
            code, log, stopped_by = None, None, None
            if ran:
                log = spec.out / f"{plan.run_id}.log"
                with log.open("w") as sink:
                    argv = plan.runner_argv(spec.out, spec.name, spec.scaling)
                    result = launch.launch(plan.framework, plan.workers, argv, plan.run_id, sink=sink,
                                           on_stop=functools.partial(watcher.stopping, plan))  # fmt: skip
                code, stopped_by = result.exit_code, result.stopped_by
                if code != 0:
                    not_ok.append(plan.run_id)
            folder = spec.out / plan.run_id
            if folder.is_dir():  # a run stopped before it wrote anything has no folder: nothing to land
                with open_store() as con:
                    Ingester(con, campaign=spec.name).ingest(discover([str(folder)]).sources)
            watcher.finished(Done(plan, ran, code, time.monotonic() - t0, log))
            if stopped_by is not None:
                name = signal.Signals(stopped_by).name
                raise Stopped(
                    f"campaign {spec.name!r} stopped by {name}: {plan.run_id} was stopped (recorded as cancelled) "
                    "and has landed with the runs that ended; no other run was started",
                    "run the spec again to do the rest: runs that ended are kept, the stopped one runs again",
                )
