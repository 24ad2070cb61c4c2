"""Running campaigns on this machine: `run` (one run) and `campaign run` (tuning, best trial, finals)."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from honestscale.cli._app import (
    MaxRepsOpt,
    StoreOpt,
    UntilCiOpt,
    WaitOpt,
    _store,
    app,
    campaign_app,
    err,
    out,
    say,
)
from honestscale.cli.analysis import _summary_rows
from honestscale.errors import HonestscaleError
from honestscale.judged import read

if TYPE_CHECKING:  # the campaign's stages import polars: not at start-up, for every command
    from honestscale.campaign import stages
    from honestscale.campaign.shared import StoreAccess


def access(store: Path | None, wait: float) -> StoreAccess:
    """The store the user named, as orchestration reaches it (``honestscale.campaign.shared.StoreAccess``)."""
    from honestscale.campaign.shared import reaching

    return reaching(lambda read_only: _store(store, read_only=read_only, wait=wait), store)


def _say_stopping(run_id: str, signum: int, then: str = ")") -> None:
    """The answer to Ctrl-C (or SIGTERM) the moment the launcher has passed it to the ranks: the user knows it was
    heard while they stop."""
    err.print(f"{signal.Signals(signum).name}: stopping {escape(run_id)} (its ranks record it as cancelled{then}",
              highlight=False)  # fmt: skip


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    ctx: typer.Context,
    framework: Annotated[str, typer.Option(help="Runner to use: torch.")] = "torch",
    workers: Annotated[int, typer.Option(help="Ranks to start on this machine.")] = 1,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id \\[default: <name>-<workers>w-<time>].")
    ] = None,
    ingest: Annotated[
        bool, typer.Option("--ingest", help="Ingest the run into the store when it ends.")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Train with N ranks on this machine; every other option goes to the runner.

    The ranks get RANK, LOCAL_RANK, WORLD_SIZE and a free MASTER_PORT (like torchrun) and the
    same run id; CPU threads are split between them. Exit code: the runner's (0 success, 3
    target accuracy not reached, 1 failed, 143 SIGTERM, 130 interrupted).

    Example (see `python -m honestscale.runners.torch_ddp --help` for the runner's options):

      honestscale run --framework torch --workers 2 --model mlp --dataset digits --epochs 3 --out runs/
    """
    from honestscale.campaign import launch

    if workers < 1:  # before anything else: the other checks mean nothing without ranks to start
        raise HonestscaleError(
            f"--workers {workers}: a run needs at least one worker", "use --workers 1 or more"
        )
    args = list(ctx.args)
    out_dir = launch.out_dir(args)
    if out_dir is None:
        raise HonestscaleError("the runner needs --out FOLDER for its event files", "add e.g. --out runs/")
    if run_id is None:
        run_id = launch.run_id_for(args, workers)
    from honestscale.campaign import shared

    if (why := shared.argv_error(framework, [*args, "--run-id", run_id])) is not None:
        raise HonestscaleError(f"the {framework} runner refuses its options: {why}",
                               f"see python -m {launch.RUNNERS[framework]} --help")  # fmt: skip
    try:
        result = launch.launch(framework, workers, args, run_id,
                               on_stop=lambda signum: _say_stopping(run_id, signum))  # fmt: skip
    except launch.LaunchError as exc:
        raise HonestscaleError(str(exc), "see honestscale run --help") from None
    run_dir = out_dir / run_id
    verdict = "succeeded" if result.exit_code == 0 else f"ended with exit code {result.exit_code}"
    err.print(f"run {run_id} {verdict}; events in {run_dir}", highlight=False)
    if ingest and run_dir.is_dir():
        with _store(store, read_only=False) as con:
            summary = launch.ingest_folder(con, run_dir)
        err.print(summary.line(), highlight=False)
    raise typer.Exit(result.exit_code)


@campaign_app.command("run")
def campaign_run(
    spec: Annotated[Path, typer.Argument(help="Campaign spec (TOML): see examples/digits-campaign.toml.")],
    store: StoreOpt = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="Run again the runs that already ended.")] = False,
    until_ci: UntilCiOpt = None,
    max_repetitions: MaxRepsOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="List the runs the spec plans (checked), run none, touch no store."),
    ] = False,
    max_runs: Annotated[
        int | None, typer.Option("--max-runs", help="Allow a plan of more runs than 1,000.", min=1)
    ] = None,
    wait: WaitOpt = 30.0,
) -> None:
    """Run a campaign on this machine: the tuning study, then every grid point x repetition; ingest as it goes.

    Run ids are stable and name what defines the run (a hash of its framework, workers, options, seed), so
    running the same spec again only does the runs that have not ended, and an edited spec runs its new points:
    the runs of the earlier spec are kept, marked superseded and left out of summaries and reports. Each run's
    output goes to <out>/<run_id>.log. Exit code 0 when every run succeeded, 1 otherwise, 130 when Ctrl-C stopped
    it (the runs in progress are recorded as cancelled and land; nothing more starts). One `campaign run` of a
    spec at a time: a second one is refused while the first runs.

    With --until-ci 5% (or \\[campaign] until_ci = "5%"), each point gets more repetitions after its first
    ones, one round at a time, until the 95 % interval of its median time lies within 5 % of the median
    (SC15 rule 5) or it has --max-repetitions runs; the end says how many each point needed.
    """
    not_ok = run_campaign(spec, store, rerun, wait, until_ci, max_repetitions, dry_run, max_runs)
    raise typer.Exit(1 if not_ok else 0)


class _Progress:
    """The campaign's progress on the terminal (a bar per stage), or one line per run in a log."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.began = total, 0, time.monotonic()
        self.bar: Progress | None = None
        self.task: Any = None

    @contextlib.contextmanager
    def stage(self, stage: stages.Stage) -> Iterator[None]:
        if stage.name == "more repetitions":  # rounds of --until-ci: not in the plan counted at the start
            self.total += len(stage.plans)
        with Progress(
            TextColumn(f"[bold]{stage.label}[/]"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), TextColumn("{task.fields[now]}"), console=err, disable=not err.is_terminal,
        ) as bar:  # fmt: skip
            self.bar, self.task = bar, bar.add_task(stage.label, total=len(stage.plans), now="")
            yield

    def started(self, plan: Any) -> None:
        assert self.bar is not None
        self.bar.update(self.task, now=plan.run_id)

    def stopping(self, plan: Any, signum: int) -> None:
        _say_stopping(plan.run_id, signum, ", then it lands); no other run starts")

    def finished(self, done: Any) -> None:
        assert self.bar is not None
        self.done += 1
        if done.exit_code not in (None, 0):
            err.print(
                f"[yellow]{escape(done.plan.run_id)}[/]: exit code {done.exit_code}, see {escape(str(done.log))}"
            )
        if not err.is_terminal:  # a log, not a terminal: one line per run, with the campaign's progress
            what = f"done in {done.seconds:.1f} s" if done.ran else "already ended, kept"
            elapsed = time.monotonic() - self.began
            err.print(f"[{self.done}/{self.total}] {done.plan.run_id}: {what} (elapsed {elapsed // 60:.0f}:{elapsed % 60:02.0f})",
                      highlight=False, markup=False)  # fmt: skip
        self.bar.advance(self.task)


def run_campaign(
    spec: Path,
    store: Path | None,
    rerun: bool,
    wait: float,
    until_ci: str | None = None,
    max_reps: int | None = None,
    dry_run: bool = False,
    max_runs: int | None = None,
) -> list[str]:
    """Run a spec locally (tuning, then finals), ingesting as it goes; print the summary; return the failed runs."""
    from honestscale.campaign import local, shared
    from honestscale.campaign import spec as _campaign
    from honestscale.cli import _output, _summary

    s = _campaign.with_until_ci(shared.load(spec), until_ci, max_reps)
    plans = s.plans()
    _campaign.check_size(s, plans, max_runs)
    shared.check_runner_args(s, plans)
    if dry_run:
        out.print(_output.plan_table(s.name, plans))
        return []
    err.print(f"campaign {escape(s.name)}: {len(plans)} run(s) planned", highlight=False)
    local.check_environments(s)
    stopped: local.Stopped | None = None
    with local.hold(s):
        if (superseded := shared.record_spec(access(store, wait), s)) is not None:
            err.print(f"[yellow]{escape(superseded.describe())}[/]", highlight=False)
        try:
            not_ok = local.run(
                s, rerun=rerun, open_store=lambda: _store(store, read_only=False, wait=wait),
                best=lambda: shared.best_trial(access(store, wait), s, say), watcher=_Progress(len(s.plans())),
            )  # fmt: skip
        except local.Stopped as exc:
            stopped, not_ok = exc, []
    if stopped is not None:  # what landed before the stop, then the stop's message and exit code (130)
        with _store(store, read_only=True, wait=wait) as con:
            out.print(_summary.summary_table(_summary_rows(read(con, s.name))))
        raise stopped
    with _store(store, read_only=True, wait=wait) as con:
        rows = _summary_rows(read(con, s.name))
        precise = shared.precisions(con, s)
    out.print(_summary.summary_table(rows))
    for point, text in precise:
        err.print(f"{s.name} {point}: {text}", highlight=False, markup=False)
    if not_ok:
        err.print(f"[yellow]{len(not_ok)} run(s) did not succeed[/]: {escape(', '.join(not_ok))}")
    return not_ok
