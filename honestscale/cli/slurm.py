"""Campaigns on Slurm: submit, status, collect, resubmit. They parse and print; the campaign's life on Slurm
(which stage is next, waiting, collecting, retries) is :mod:`honestscale.campaign.on_slurm`'s."""

from __future__ import annotations

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

from honestscale.cli._app import (
    MaxRepsOpt,
    StoreOpt,
    UntilCiOpt,
    WaitOpt,
    campaign_app,
    err,
    out,
    say,
)
from honestscale.cli.campaign import access


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
    while submit_campaign(spec, store, dry_run=dry_run, arrays=arrays, wait=wait, until_ci=until_ci,
                          max_reps=max_repetitions) and follow and not dry_run:  # fmt: skip
        wait_for_jobs(spec, store, wait, interval)
        collect_campaign(spec, store, wait)


def submit_campaign(spec: Path, store: Path | None, *, dry_run: bool, arrays: bool, wait: float,
                    until_ci: str | None = None, max_reps: int | None = None) -> int:  # fmt: skip
    """`campaign submit` once (also `probe --slurm`'s): print what it did; the number of jobs submitted."""
    from honestscale.campaign import on_slurm

    got = on_slurm.submit(spec, access(store, wait), dry_run=dry_run, arrays=arrays, notify=say,
                          until_ci=until_ci, max_reps=max_reps)  # fmt: skip
    if dry_run:
        for job in got.jobs:
            print(f"# --- {job.point}: {len(job.plans)} run(s) ---")
            print(job.script)
        return 0
    if not got.jobs:
        for point, text in got.precisions:
            say(f"{got.campaign} {point}: {text}")
        err.print("every run of this campaign has been submitted: see `honestscale campaign status`")
        return 0
    if got.superseded is not None:
        err.print(f"[yellow]{escape(got.superseded.describe())}[/]", highlight=False)
    err.print(f"submitted {len(got.jobs)} job(s) for {len(got.submitted)} {got.stage} of {got.campaign}; "
              f"follow with `honestscale campaign status {spec}`", highlight=False)  # fmt: skip
    return len(got.jobs)


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

    from honestscale.campaign import on_slurm
    from honestscale.campaign import slurm as _slurm

    s, _ = on_slurm.load(spec)
    states = on_slurm.poll(s, access(store, wait))
    if not states:
        err.print(f"no job of campaign {s.name} has been submitted")
        return
    if follow:
        with Live(_states_table(states), console=out, refresh_per_second=1) as live:
            while any(st.state not in _slurm.TERMINAL for st in states):
                time.sleep(interval)
                states = on_slurm.poll(s, access(store, wait))
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
    collect_campaign(spec, store, wait)


def collect_campaign(spec: Path, store: Path | None, wait: float) -> None:
    """`campaign collect` (also `submit --follow`'s and `probe --slurm`'s): print what was recorded and landed."""
    from honestscale.campaign import on_slurm

    got = on_slurm.collect(spec, access(store, wait))
    for run_id in got.recorded:
        say(f"recorded {run_id}: ended by Slurm without a run_stop from the runner")
    if got.line is None:
        err.print(f"nothing to collect in {escape(str(got.out))} yet")
        return
    print(got.line + (f"; {got.pending} job(s) still pending or running" if got.pending else ""))


def wait_for_jobs(spec: Path, store: Path | None, wait: float, interval: float) -> None:
    """Wait until every job of the campaign has ended, with a progress bar (a line per change in a log)."""
    from honestscale.campaign import on_slurm

    name = on_slurm.load(spec)[0].name
    last = [""]
    with Progress(
        TextColumn(f"[bold]{escape(name)} on Slurm[/]"), BarColumn(), TextColumn("{task.completed}/{task.total} ended"),
        TextColumn("{task.fields[now]}"), console=err, disable=not err.is_terminal,
    ) as progress:  # fmt: skip
        task = progress.add_task("jobs", total=None, now="")

        def show(now: str, ended: int, total: int) -> None:
            progress.update(task, total=total, completed=ended, now=now)
            if not err.is_terminal and now != last[0]:
                say(f"{name}: {now}")
            last[0] = now

        on_slurm.wait_for_jobs(spec, access(store, wait), interval, show)


@campaign_app.command("resubmit")
def campaign_resubmit(
    spec: Annotated[Path, typer.Argument(help="The campaign spec that was submitted.")],
    store: StoreOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the scripts; submit nothing.")] = False,
    wait: WaitOpt = 30.0,
) -> None:
    """Run again only the points whose runs did not succeed, as new runs (<run_id>.retryN): the failed runs stay recorded."""
    from honestscale.campaign import on_slurm
    from honestscale.campaign import slurm as _slurm

    s, sl = on_slurm.load(spec)
    retry = on_slurm.retries(s, access(store, wait))
    if not retry:
        err.print("nothing to resubmit: every submitted run succeeded (collect first if jobs just ended)")
        return
    jobs = _slurm.scripts(s, sl, retry, arrays=False)
    if dry_run:
        for job in jobs:
            print(job.script)
        return
    with access(store, wait).open(False) as con:
        done = _slurm.submit(con, s, jobs)
    say(f"resubmitted {len(done)} run(s): {', '.join(r for r, _ in done)}")
