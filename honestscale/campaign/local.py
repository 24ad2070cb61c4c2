"""Running a campaign on this machine: each stage's runs in turn, each ingested as soon as it ends.

Run ids are stable: a run that already ended is kept, not run again (unless ``rerun``). What happens is
told to a :class:`Watcher` (the CLI draws progress from it); the store is opened through ``open_store``
only while a run's events land, so `runs` and `show` can read it in between.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
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


class Watcher(Protocol):
    def stage(self, stage: Stage) -> AbstractContextManager[None]: ...

    def started(self, plan: RunPlan) -> None: ...

    def finished(self, done: Done) -> None: ...


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
            code, log = None, None
            if ran:
                log = spec.out / f"{plan.run_id}.log"
                with log.open("w") as sink:
                    argv = plan.runner_argv(spec.out, spec.name, spec.scaling)
                    code = launch.launch(plan.framework, plan.workers, argv, plan.run_id, sink=sink).exit_code
                if code != 0:
                    not_ok.append(plan.run_id)
            with open_store() as con:
                Ingester(con, campaign=spec.name).ingest(discover([str(spec.out / plan.run_id)]).sources)
            watcher.finished(Done(plan, ran, code, time.monotonic() - t0, log))
