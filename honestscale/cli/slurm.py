"""Campaigns on Slurm: submit, status, collect, resubmit."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
)

from honestscale.cli._app import MaxRepsOpt, StoreOpt, UntilCiOpt, WaitOpt, _store, campaign_app, err, out
from honestscale.cli.campaign import _best_trial, _record_spec, _runner_options
from honestscale.collector import discover
from honestscale.collector.ingest import Ingester
from honestscale.errors import HonestscaleError
from honestscale.store import campaigns, resolve_store_path


def _load_slurm_campaign(spec: Path) -> tuple[Any, Any]:
    from honestscale.campaign import slurm as _slurm
    from honestscale.campaign import spec as _campaign

    s = _campaign.load(spec, _runner_options)
    return s, _slurm.parse(s)


@campaign_app.command("submit")
def campaign_submit(
    spec: Annotated[Path, typer.Argument(help="Campaign spec (TOML) with a \\[slurm] table.")],
    store: StoreOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the sbatch scripts; submit nothing.")
    ] = False,
    arrays: Annotated[bool, typer.Option(help="Repetitions of a point as one job array.")] = True,
    until_ci: UntilCiOpt = None,
    max_repetitions: MaxRepsOpt = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Wait for the jobs, collect them and submit the next stage or round, until none is left.",
        ),
    ] = False,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --follow.")] = 10.0,
    wait: WaitOpt = 30.0,
) -> None:
    """Submit a campaign to Slurm: one job array per grid point (a task per repetition), one srun per run.

    Everything is checked first (keys, partition, shapes, the framework on the \\[slurm] python); nothing is
    submitted if anything is wrong. With a \\[tuning] study, the trials are submitted first; run submit
    again once they have ended and been collected: it then submits the final runs with the best trial.
    With --until-ci 5% (or \\[campaign] until_ci), once a point's runs are collected, submit adds one more
    repetition of every point whose 95 % interval is still wider than 5 % of its median, up to
    --max-repetitions. --follow does all of it in one command: submit, wait, collect, submit again.
    The scripts, job ids and the plan are recorded in the store.
    """
    while _submit_campaign(spec, store, dry_run=dry_run, arrays=arrays, wait=wait, until_ci=until_ci,
                           max_reps=max_repetitions) and follow and not dry_run:  # fmt: skip
        _wait_for_jobs(spec, store, wait, interval)
        _collect_campaign(spec, store, wait)


def _submit_campaign(
    spec: Path,
    store: Path | None,
    *,
    dry_run: bool,
    arrays: bool,
    wait: float,
    until_ci: str | None = None,
    max_reps: int | None = None,
) -> int:
    """campaign submit: check everything, then sbatch the runs not submitted yet; the number of jobs."""
    from honestscale.campaign import repeat
    from honestscale.campaign import slurm as _slurm
    from honestscale.campaign import spec as _campaign

    s, sl = _load_slurm_campaign(spec)
    s = _campaign.with_until_ci(s, until_ci, max_reps)
    for framework in s.frameworks():
        _slurm.check_framework(sl, framework)
    # every run's shape is checked now, before the store or Slurm is touched
    _slurm.scripts(s, sl, s.plans(), arrays=arrays)
    if not dry_run and shutil.which("sinfo"):
        parts = subprocess.run(
            ["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60
        ).stdout.split()
        if parts and sl.partition not in parts:
            raise HonestscaleError(f"partition {sl.partition!r} does not exist here (sinfo: {', '.join(parts)})",
                                   "set [slurm] partition to one of them")  # fmt: skip
    submitted: set[str] = set()
    if resolve_store_path(store).exists():  # a dry run never creates a store
        with _store(store, read_only=dry_run, wait=wait) as con:
            submitted = campaigns.submitted_runs(con, s.name)
    from honestscale.campaign import stages

    plans: list[Any] = []
    stage = "final runs"
    for step in stages.stages(s, lambda: _best_trial(store, s, wait)):  # the first stage with runs to submit
        plans, stage = [p for p in step.plans if p.run_id not in submitted], step.name
        if plans:
            break
    if not plans and s.until_ci is not None and resolve_store_path(store).exists():
        with _store(
            store, read_only=True, wait=wait
        ) as con:  # every planned run is out: the next round, if any
            plans = repeat.next_round(con, s, step.plans, pending=submitted)
        stage = "more repetitions (until the 95 % interval is narrow enough)"
    jobs = _slurm.scripts(
        s, sl, plans, arrays=arrays
    )  # shapes are checked here, before anything is submitted
    if dry_run:
        for job in jobs:
            print(f"# --- {job.point}: {len(job.plans)} run(s) ---")
            print(job.script)
        return 0
    if not jobs:
        if s.until_ci is not None:
            with _store(store, read_only=True, wait=wait) as con:
                for point, p in repeat.precisions(con, s, step.plans).items():
                    err.print(f"{s.name} {point}: {p.describe()}", highlight=False, markup=False)
        err.print("every run of this campaign has been submitted: see `honestscale campaign status`")
        return 0
    _record_spec(store, s, wait)
    with _store(store, read_only=False, wait=wait) as con:
        done = _slurm.submit(con, s, jobs)
    err.print(f"submitted {len(jobs)} job(s) for {len(done)} {stage} of {s.name}; "
              f"follow with `honestscale campaign status {spec}`", highlight=False)  # fmt: skip
    return len(jobs)


def _states_table(states: list[Any]) -> Any:
    from rich.table import Table

    table = Table(title=f"{len(states)} runs", title_justify="left")
    for col in ("run", "job", "state", "reason", "seen by"):
        table.add_column(col)
    for st in states:
        style = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}.get(st.state, "red")
        table.add_row(st.run_id, st.job_id, f"[{style}]{st.state}[/]", st.reason or "", st.source)
    return table


@campaign_app.command("status")
def campaign_status(
    spec: Annotated[Path, typer.Argument(help="The campaign spec that was submitted.")],
    store: StoreOpt = None,
    follow: Annotated[bool, typer.Option("--follow", help="Refresh until every job has ended.")] = False,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes with --follow.")] = 10.0,
    wait: WaitOpt = 30.0,
) -> None:
    """Where the campaign's jobs are: one squeue call for all of them, scontrol for finished ones, then events."""
    from rich.live import Live

    from honestscale.campaign import slurm as _slurm

    s, _ = _load_slurm_campaign(spec)

    def poll() -> list[Any]:
        with _store(store, read_only=False, wait=wait) as con:
            return _slurm.poll(con, s.name, s.out)

    states = poll()
    if not states:
        err.print(f"no job of campaign {s.name} has been submitted")
        return
    if follow:
        with Live(_states_table(states), console=out, refresh_per_second=1) as live:
            while any(st.state not in _slurm.TERMINAL for st in states):
                time.sleep(interval)
                states = poll()
                live.update(_states_table(states))
    else:
        out.print(_states_table(states))
    print(_slurm.tally(states))


@campaign_app.command("collect")
def campaign_collect(
    spec: Annotated[Path, typer.Argument(help="The campaign spec that was submitted.")],
    store: StoreOpt = None,
    wait: WaitOpt = 30.0,
) -> None:
    """Ingest what the campaign's runs wrote; jobs that timed out, were cancelled, failed or never started are
    recorded with that status (a run_stop naming the Slurm job), never dropped."""
    _collect_campaign(spec, store, wait)


def _collect_campaign(spec: Path, store: Path | None, wait: float) -> None:
    from honestscale.campaign import slurm as _slurm

    s, _ = _load_slurm_campaign(spec)
    plans = {p.run_id: p for p in s.plans()}
    with _store(store, read_only=False, wait=wait) as con:
        states = _slurm.poll(con, s.name, s.out)
    written = _slurm.record_unfinished(s, states, plans)
    for run_id in written:
        err.print(f"recorded {run_id}: ended by Slurm without a run_stop from the runner", highlight=False)
    if not s.out.is_dir():
        err.print(f"nothing to collect in {s.out} yet")
        return
    with _store(store, read_only=False, wait=wait) as con:
        summary = Ingester(con, campaign=s.name).ingest(discover([str(s.out)]).sources)
    pending = [st for st in states if st.state not in _slurm.TERMINAL]
    print(summary.line() + (f"; {len(pending)} job(s) still pending or running" if pending else ""))


def _wait_for_jobs(spec: Path, store: Path | None, wait: float, interval: float) -> None:
    """Poll the campaign's jobs (squeue, then scontrol) until every one has ended, with a progress bar."""
    from honestscale.campaign import slurm as _slurm

    s, _ = _load_slurm_campaign(spec)
    with Progress(
        TextColumn(f"[bold]{escape(s.name)} on Slurm[/]"), BarColumn(), TextColumn("{task.completed}/{task.total} ended"),
        TextColumn("{task.fields[now]}"), console=err, disable=not err.is_terminal,
    ) as progress:  # fmt: skip
        task = progress.add_task("jobs", total=None, now="")
        last = ""
        while True:
            with _store(store, read_only=False, wait=wait) as con:
                states = _slurm.poll(con, s.name, s.out)
            now = _slurm.tally(states)
            ended = sum(st.state in _slurm.TERMINAL for st in states)
            progress.update(task, total=len(states), completed=ended, now=now)
            if not err.is_terminal and now != last:
                err.print(f"{s.name}: {now}", highlight=False)
            last = now
            if ended == len(states):
                return
            time.sleep(interval)


@campaign_app.command("resubmit")
def campaign_resubmit(
    spec: Annotated[Path, typer.Argument(help="The campaign spec that was submitted.")],
    store: StoreOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the scripts; submit nothing.")] = False,
    wait: WaitOpt = 30.0,
) -> None:
    """Run again only the points whose runs did not succeed, as new runs (<run_id>.retryN): the failed runs stay recorded."""
    import dataclasses

    from honestscale.campaign import slurm as _slurm

    s, sl = _load_slurm_campaign(spec)
    with _store(store, read_only=True, wait=wait) as con:
        status = campaigns.run_statuses(con, s.name)
        ids = campaigns.submitted_runs(con, s.name)
    plans = {p.run_id: p for p in s.plans()}
    retry = []
    for run_id, plan in plans.items():
        if run_id not in ids or status.get(run_id) == "success":
            continue
        if any(status.get(f"{run_id}.retry{n}") == "success" for n in range(1, 20)):
            continue
        n = 1 + max((int(i.rsplit("retry", 1)[1]) for i in ids if i.startswith(run_id + ".retry")), default=0)
        retry.append(dataclasses.replace(plan, run_id=f"{run_id}.retry{n}"))
    if not retry:
        err.print("nothing to resubmit: every submitted run succeeded (collect first if jobs just ended)")
        return
    jobs = _slurm.scripts(s, sl, retry, arrays=False)
    if dry_run:
        for job in jobs:
            print(job.script)
        return
    with _store(store, read_only=False, wait=wait) as con:
        done = _slurm.submit(con, s, jobs)
    err.print(f"resubmitted {len(done)} run(s): {', '.join(r for r, _ in done)}", highlight=False)
