"""A campaign's life on Slurm: submit its next stage (tuning, finals, another round of repetitions), wait for the
jobs, collect what they wrote, run again what did not succeed. `campaign submit|status|collect|resubmit` and
`probe --slurm` call these; the CLI prints what they return. The sbatch scripts, squeue and scontrol are
:mod:`honestscale.campaign.slurm`'s.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from honestscale.campaign import shared
from honestscale.campaign import slurm as _slurm
from honestscale.campaign import spec as _campaign
from honestscale.campaign.shared import Notify, StoreAccess
from honestscale.errors import HonestscaleError
from honestscale.store import campaigns


def load(spec: Path) -> tuple[_campaign.Spec, _slurm.SlurmSpec]:
    """The campaign spec and its \\[slurm] table, both checked."""
    s = shared.load(spec)
    return s, _slurm.parse(s)


@dataclass
class Submission:
    """What one `campaign submit` did: the jobs (printed, not submitted, on a dry run), the stage they belong to,
    the runs submitted, and, when every run is out, how precise each point came out (with until_ci)."""

    campaign: str
    jobs: list[_slurm.Job] = field(default_factory=list)
    stage: str = "final runs"
    submitted: list[tuple[str, str]] = field(default_factory=list)  # (run id, job id)
    precisions: list[tuple[str, str]] = field(default_factory=list)
    superseded: shared.Superseded | None = None


def _check_partition(sl: _slurm.SlurmSpec) -> None:
    if not shutil.which("sinfo"):
        return
    parts = subprocess.run(
        ["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    if parts and sl.partition not in parts:
        raise HonestscaleError(f"partition {sl.partition!r} does not exist here (sinfo: {', '.join(parts)})",
                               "set [slurm] partition to one of them")  # fmt: skip


def submit(spec: Path, store: StoreAccess, *, dry_run: bool, arrays: bool, notify: Notify,
           until_ci: str | None = None, max_reps: int | None = None) -> Submission:  # fmt: skip
    """Check everything, then sbatch the runs of the first stage not submitted yet (a dry run: the scripts only).

    Nothing is submitted if anything is wrong: keys, the partition, each run's shape, the framework on the
    \\[slurm] python. The spec and its plan are recorded in the store with the job ids.
    """
    from honestscale.campaign import repeat, stages

    s, sl = load(spec)
    s = _campaign.with_until_ci(s, until_ci, max_reps)
    for framework in s.frameworks():
        _slurm.check_framework(sl, framework)
    _slurm.scripts(s, sl, s.plans(), arrays=arrays)  # every run's shape, before the store or Slurm is touched
    if not dry_run:
        _check_partition(sl)
    submitted: set[str] = set()
    if store.exists():  # a dry run never creates a store
        with store.open(dry_run) as con:
            submitted = campaigns.submitted_runs(con, s.name)
    got = Submission(s.name)
    step: stages.Stage | None = None
    for step in stages.stages(
        s, lambda: shared.best_trial(store, s, notify)
    ):  # the first stage with runs to submit
        plans, got.stage = [p for p in step.plans if p.run_id not in submitted], step.name
        if plans:
            break
    else:
        plans = []
    if not plans and s.until_ci is not None and step is not None and store.exists():
        with store.open(True) as con:  # every planned run is out: the next round, if any
            plans = repeat.next_round(con, s, step.plans, pending=submitted)
        got.stage = "more repetitions (until the 95 % interval is narrow enough)"
    got.jobs = _slurm.scripts(s, sl, plans, arrays=arrays)
    if dry_run:
        return got
    if not got.jobs:
        if s.until_ci is not None and step is not None:
            with store.open(True) as con:
                got.precisions = [(p, v.describe()) for p, v in repeat.precisions(con, s, step.plans).items()]
        return got
    got.superseded = shared.record_spec(store, s)
    with store.open(False) as con:
        got.submitted = _slurm.submit(con, s, got.jobs)
    return got


def poll(s: _campaign.Spec, store: StoreAccess) -> list[_slurm.JobState]:
    """Where each of the campaign's jobs is: one squeue call for all of them, scontrol for finished ones."""
    with store.open(False) as con:
        return _slurm.poll(con, s.name, s.out)


def wait_for_jobs(spec: Path, store: StoreAccess, interval: float,
                  progress: Callable[[str, int, int], None]) -> None:  # fmt: skip
    """Poll the campaign's jobs every ``interval`` seconds until every one has ended; ``progress(tally, ended,
    total)`` after each poll."""
    s, _ = load(spec)
    while True:
        states = poll(s, store)
        ended = sum(st.state in _slurm.TERMINAL for st in states)
        progress(_slurm.tally(states), ended, len(states))
        if ended == len(states):
            return
        time.sleep(interval)


@dataclass
class Collected:
    recorded: list[str]  # runs Slurm ended without a run_stop from the runner: recorded with that status
    line: str | None  # the ingest's summary line; None when the output folder does not exist yet
    pending: int  # jobs still pending or running
    out: Path  # the campaign's output folder


def collect(spec: Path, store: StoreAccess) -> Collected:
    """Ingest what the campaign's runs wrote; jobs that timed out, were cancelled, failed or never started are
    recorded with that status (a run_stop naming the Slurm job), never dropped."""
    from honestscale.collector import discover
    from honestscale.collector.ingest import Ingester

    s, _ = load(spec)
    plans = {p.run_id: p for p in s.plans()}
    states = poll(s, store)
    written = _slurm.record_unfinished(s, states, plans)
    pending = sum(st.state not in _slurm.TERMINAL for st in states)
    if not s.out.is_dir():
        return Collected(written, None, pending, s.out)
    with store.open(False) as con:
        summary = Ingester(con, campaign=s.name).ingest(discover([str(s.out)]).sources)
    return Collected(written, summary.line(), pending, s.out)


def retries(s: _campaign.Spec, store: StoreAccess) -> list[_campaign.RunPlan]:
    """The runs to do again: every submitted run that did not succeed and has no successful retry, as a new run
    (``<run_id>.retryN``): the failed runs stay recorded."""
    with store.open(True) as con:
        status = campaigns.run_statuses(con, s.name)
        ids = campaigns.submitted_runs(con, s.name)
    retry = []
    for run_id, plan in {p.run_id: p for p in s.plans()}.items():
        if run_id not in ids or status.get(run_id) == "success":
            continue
        if any(status.get(f"{run_id}.retry{n}") == "success" for n in range(1, 20)):
            continue
        n = 1 + max((int(i.rsplit("retry", 1)[1]) for i in ids if i.startswith(run_id + ".retry")), default=0)
        retry.append(dataclasses.replace(plan, run_id=f"{run_id}.retry{n}"))
    return retry
