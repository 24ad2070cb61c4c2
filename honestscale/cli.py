"""The ``honestscale`` command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from honestscale import __version__, _output
from honestscale import events as ev
from honestscale.collector._sources import Source, discover
from honestscale.collector.ingest import FileResult, Ingester, Summary
from honestscale.errors import HonestscaleError
from honestscale.store import STORE_ENV, Connection, campaigns, open_store, resolve_store_path

app = typer.Typer(
    name="honestscale",
    help=(
        "Results store, honest-metrics linter and scaling reports for distributed deep-learning training.\n\n"
        "Runners write events (one JSONL file per rank); `honestscale ingest` lands them, and MLPerf "
        ":::MLLOG result logs, in a DuckDB store; `runs`, `show` and `quarantine` read it back."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
if not out.is_terminal:
    out = Console(width=200)
err = Console(stderr=True, soft_wrap=True)

EXIT_OK, EXIT_USAGE, EXIT_QUARANTINED = 0, 2, 3

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        envvar=STORE_ENV,
        help="DuckDB store to use (default: ./honestscale.duckdb in the current folder).",
        show_default=False,
    ),
]
WaitOpt = Annotated[
    float,
    typer.Option(
        "--wait", help="Seconds to wait for another process that holds the store, before giving up."
    ),
]


class TableFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class ShowFormat(StrEnum):
    text = "text"
    json = "json"


class QuarantineFormat(StrEnum):
    table = "table"
    json = "json"


def _version(value: bool) -> None:
    if value:
        print(f"honestscale {__version__} (event contract v{ev.SCHEMA_VERSION})")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="The store for every command (before the command name, or after it).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """honestscale: honest numbers for distributed deep-learning training."""
    if store is not None:  # read by the command's own --store (its environment variable) unless it gives one
        os.environ[STORE_ENV] = str(store)


@contextlib.contextmanager
def _store(store: Path | None, *, read_only: bool, wait: float = 10.0) -> Iterator[Connection]:
    con = open_store(
        store, read_only=read_only, wait_s=wait, on_wait=lambda m: err.print(f"[yellow]{escape(m)}[/]")
    )
    try:
        yield con
    finally:
        con.close()


def _report_file(result: FileResult, quiet: bool, verbose: bool = False) -> None:
    if quiet:
        return
    for warning in result.warnings:
        err.print(f"[yellow]warning[/] {escape(str(result.path))}: {escape(warning)}", highlight=False)
    if verbose:
        for note in result.notes:
            err.print(f"note {result.path}: {note}", highlight=False)
    if result.conflicts:
        err.print(
            f"[red]conflict[/] {escape(str(result.path))}: {result.conflicts} event(s) claim a run id, rank and seq "
            "already stored from another file with different content; that run's events from this file are in "
            "the quarantine, the stored run is unchanged (see `honestscale quarantine --file`)",
            highlight=False,
        )
    if result.action != "unchanged" and result.quarantined:
        err.print(
            f"[yellow]warning[/] {result.path}: {result.quarantined} line(s) quarantined "
            "(see `honestscale quarantine`)"
        )


def _progress(total: int) -> Progress:
    return Progress(
        TextColumn("[bold]ingest[/]"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[file]}"),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def _run_ingest(ingester: Ingester, sources: list[Source], quiet: bool, verbose: bool) -> Summary:
    sizes = {s.path: s.path.stat().st_size for s in sources}
    with _progress(sum(sizes.values())) as progress:
        task = progress.add_task("ingest", total=sum(sizes.values()), file="")

        def advance(source: Source, result: FileResult) -> None:
            progress.update(task, advance=sizes[source.path], file=source.path.name)
            _report_file(result, quiet, verbose)

        return ingester.ingest(sources, advance=advance)


class _Stop(Exception):
    pass


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


def _watch(
    folder: Path, store: Path | None, campaign: str | None, interval: float, wait: float, quiet: bool
) -> int:
    if not folder.is_dir():
        raise HonestscaleError(f"--watch {folder}: not a folder", "give the folder the runners write into")
    signal.signal(signal.SIGTERM, _on_term)
    err.print(f"watching {folder} every {interval:g} s; Ctrl-C to stop")
    seen: dict[Path, tuple[int, int]] = {}
    total = Summary()
    try:
        while True:
            found = discover([str(folder)]).sources
            changed = []
            for src in found:
                try:
                    st = src.path.stat()
                except FileNotFoundError:
                    continue
                if seen.get(src.path) != (st.st_size, st.st_mtime_ns):
                    changed.append((src, (st.st_size, st.st_mtime_ns)))
            if changed:
                # Hold the store only while ingesting, so `runs` and `show` can read it in between.
                with _store(store, read_only=False, wait=wait) as con:
                    summary = Ingester(con, campaign=campaign).ingest([c[0] for c in changed])
                for (src, key), result in zip(changed, summary.files, strict=True):
                    seen[src.path] = key
                    _report_file(result, quiet)
                    if result.action != "unchanged":
                        total.files.append(result)
                if summary.changed and not quiet:
                    err.print(f"{time.strftime('%H:%M:%S')} {summary.line()}")
            time.sleep(interval)
    except (KeyboardInterrupt, _Stop):
        pass
    print(f"watch stopped: {total.line()}")
    return EXIT_QUARANTINED if total.quarantined else EXIT_OK


@app.command()
def ingest(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Event files (*.jsonl, *.jsonl.gz), MLPerf result logs, folders (searched recursively) or "
            "quoted globs such as 'runs/**/events-rank*.jsonl'.",
            show_default=False,
        ),
    ] = None,
    store: StoreOpt = None,
    campaign: Annotated[
        str | None, typer.Option(help="Campaign for runs whose run_start names none (e.g. MLPerf logs).")
    ] = None,
    watch: Annotated[
        Path | None,
        typer.Option(
            "--watch",
            help="Keep ingesting new and growing files under this folder until interrupted (service mode). "
            "Polls, so it works on the shared filesystems (NFS, Lustre, GPFS) where inotify sees nothing.",
            show_default=False,
        ),
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --watch.")] = 5.0,
    force: Annotated[
        bool,
        typer.Option("--force", help="Read files again from the start even if unchanged (after an upgrade)."),
    ] = False,
    wait: WaitOpt = 30.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary line.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also print notes per file.")] = False,
) -> None:
    """Land event files and MLPerf logs in the store: idempotent, incremental, atomic per file, lossless.

    Ingesting the same files again adds nothing; a file that grew adds only its new events; a
    file lands whole or not at all, so after a crash or kill the next ingest completes the job;
    every line that cannot be parsed goes to the quarantine with its file, line number and reason.

    An event whose run id, rank and seq are already stored is skipped when it is the same line (a
    copy of a file) and is a conflict when it differs (two runs claiming one id): nothing stored is
    replaced, and that run's events from the conflicting file go to the quarantine, naming the other file.

    Exit codes: 0 all landed; 3 landed, but some lines are quarantined (conflicts included); 2 bad
    usage, unreadable input, or the store is held by another process past --wait.

    Examples:

      honestscale ingest runs/                       # every events-rank*.jsonl below runs/

      honestscale ingest results/*/resnet/result_*.txt --campaign mlperf-v0.7

      honestscale ingest --watch /scratch/$USER/campaign   # while the jobs run
    """
    if watch is not None:
        if paths:
            raise HonestscaleError("give either PATHs or --watch FOLDER, not both", "run two commands")
        raise typer.Exit(_watch(watch, store, campaign, interval, wait, quiet))
    if not paths:
        raise HonestscaleError(
            "nothing to ingest: give files, folders or globs", "e.g. honestscale ingest runs/  (see --help)"
        )
    found = discover(paths)
    if not found.sources:
        raise HonestscaleError(
            f"no event files or MLPerf logs in {', '.join(paths)} ({len(found.skipped)} other files)",
            "runners write <run_id>/events-rank<N>.jsonl; MLPerf logs hold ':::MLLOG' lines",
        )
    with _store(store, read_only=False, wait=wait) as con:
        ingester = Ingester(con, campaign=campaign, force=force)
        try:
            summary = _run_ingest(ingester, found.sources, quiet, verbose)
        except KeyboardInterrupt:
            err.print(
                "[red]interrupted[/]: files that finished have landed; the file in progress was rolled back"
            )
            raise typer.Exit(130) from None
    summary.skipped = found.skipped
    if verbose:
        for path in found.skipped:
            err.print(f"skipped {path}: not an event file or MLPerf log", highlight=False)
    print(summary.line())
    raise typer.Exit(EXIT_QUARANTINED if summary.quarantined else EXIT_OK)


@app.command()
def runs(
    store: StoreOpt = None,
    format: Annotated[
        TableFormat, typer.Option("--format", "-f", help="table for people, json/csv for scripts.")
    ] = (TableFormat.table),
    campaign: Annotated[str | None, typer.Option(help="Only runs of this campaign.")] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """List the runs in the store, with status, time to train and final accuracy.

    JSON gives an array of objects (run_id, source, campaign, system, framework, purpose, n_nodes,
    n_accelerators, accelerator, global_batch_size, local_batch_size, status, started_at,
    time_to_train_s, final_accuracy {split, metric, value} or null, source_file, ...).
    """
    from honestscale import _output
    from honestscale.store import queries  # polars: only the reading commands need it

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        df = queries.runs(con, campaign)
    if format is TableFormat.json:
        print(_output.dumps(_output.run_records(df)))
    elif format is TableFormat.csv:
        sys.stdout.write(_output.runs_csv(df))
    elif df.height == 0:
        err.print("no runs in the store yet: `honestscale ingest PATH` first")
    else:
        out.print(_output.runs_table(df))


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="Run id, or any part of it that names one run.")],
    store: StoreOpt = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    wait: WaitOpt = 10.0,
) -> None:
    """One run: what it ran on, its evaluations, where its step time went, and lost events."""
    from honestscale import _output
    from honestscale.store import queries  # polars: only the reading commands need it

    with _store(store, read_only=True, wait=wait) as con:
        rid = queries.resolve_run_id(con, run_id)
        run = queries.run(con, rid).row(0, named=True)
        rec = _output.show_record(
            run, queries.evals(con, rid), queries.step_breakdown(con, rid), queries.event_counts(con, rid)
        )
    if format is ShowFormat.json:
        print(_output.dumps(rec))
    else:
        out.print(_output.show_renderable(rec))


@app.command()
def quarantine(
    store: StoreOpt = None,
    format: Annotated[QuarantineFormat, typer.Option("--format", "-f")] = QuarantineFormat.table,
    file: Annotated[Path | None, typer.Option("--file", help="Only lines of this file.")] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """Lines that could not land: file, line number, reason and the raw text. JSON: [{file, line, reason, raw}]."""
    from honestscale import _output
    from honestscale.store import queries  # polars: only the reading commands need it

    with _store(store, read_only=True, wait=wait) as con:
        df = queries.quarantine(con, str(file.resolve()) if file else None)
    if format is QuarantineFormat.json:
        print(_output.dumps(_output.quarantine_records(df)))
    elif df.height == 0:
        err.print("the quarantine is empty: every line landed")
    else:
        out.print(_output.quarantine_table(df))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    ctx: typer.Context,
    framework: Annotated[str, typer.Option(help="Runner to use: torch.")] = "torch",
    workers: Annotated[int, typer.Option(help="Ranks to start on this machine.")] = 1,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id [default: <name>-<workers>w-<time>].")
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
        from honestscale.runners._usermodel import label

        name = launch.runner_option(args, "--name") or label(launch.runner_option(args, "--model") or "run")
        run_id = f"{name}-{workers}w-{time.strftime('%Y%m%dT%H%M%S')}"
    try:
        result = launch.launch(framework, workers, args, run_id)
    except launch.LaunchError as exc:
        raise HonestscaleError(str(exc), "see honestscale run --help") from None
    run_dir = out_dir / run_id
    verdict = "succeeded" if result.exit_code == 0 else f"ended with exit code {result.exit_code}"
    err.print(f"run {run_id} {verdict}; events in {run_dir}", highlight=False)
    if ingest and run_dir.is_dir():
        with _store(store, read_only=False) as con:
            summary = Ingester(con).ingest(discover([str(run_dir)]).sources)
        err.print(summary.line(), highlight=False)
    raise typer.Exit(result.exit_code)


@app.command()
def summary(
    store: StoreOpt = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    wait: WaitOpt = 10.0,
) -> None:
    """Per campaign, model and worker count: time to train and to accuracy (median of runs), throughput (harmonic
    mean of runs), step breakdown, accuracy; the same numbers as `report` and `advise` for the same runs."""
    from honestscale import _output

    with _store(store, read_only=True, wait=wait) as con:
        rows = _summary_rows(con, campaign)
    if format is ShowFormat.json:
        print(_output.dumps(_output.summary_records(rows)))
    elif not rows:
        err.print("no final runs to summarise" + (f" in campaign {campaign}" if campaign else ""))
    else:
        out.print(_output.summary_table(rows))


def _summary_rows(con: Connection, campaign: str | None) -> list[Any]:
    from honestscale.analysis import points
    from honestscale.lint._view import build
    from honestscale.store import queries

    queries.check_campaign(con, campaign)
    return points.summary(build(con, campaign), points.step_fractions(con, campaign))


campaign_app = typer.Typer(help="Campaigns: grids of runs described in a TOML spec.", no_args_is_help=True)
app.add_typer(campaign_app, name="campaign")


def _runner_options(framework: str) -> set[str]:
    """The option names (argparse dests) the framework's runner accepts; its flavour option is the launcher's."""
    import importlib

    from honestscale.campaign import launch

    if framework not in launch.RUNNERS:
        raise HonestscaleError(
            f"framework {framework!r} has no runner", f"one of: {', '.join(launch.RUNNERS)}"
        )
    # runner modules import their framework inside functions: the parser is there without it
    parser = importlib.import_module(launch.RUNNERS[framework]).build_parser()
    return {a.dest for a in parser._actions if a.dest not in ("help", "distributed")}


def _record_spec(store: Path | None, s: Any, wait: float) -> None:
    """The spec and every run it plans go to the store: the linter tells a dropped run from one never planned."""

    planned = [p.run_id for p in s.plans()]
    record = {**s.raw, "spec_path": str(s.path.resolve()), "planned_runs": planned}
    with _store(store, read_only=False, wait=wait) as con:
        campaigns.record_campaign(con, s.name, json.dumps(record, default=str))


def _best_trial(store: Path | None, s: Any, wait: float) -> tuple[dict[str, object], str]:
    """The tuning study's best trial by mean final validation accuracy, as grid values and its name."""
    from honestscale.campaign import spec as _campaign
    from honestscale.store import queries

    with _store(store, read_only=True, wait=wait) as con:
        trials = queries.tuning_trials(con, s.name, str(s.tuning["name"]))
    best = trials.filter(trials["validation_accuracy"].is_not_null())
    if best.height == 0:
        raise HonestscaleError(f"tuning study {s.tuning['name']!r}: no trial has a validation accuracy",
                               "look at the trials' logs in " + str(s.out))  # fmt: skip
    trial = str(best["trial"][0])
    point = next(p for p in _campaign.points(s.tuning["grid"]) if _campaign.slug(p) == trial)
    err.print(
        f"tuning {s.tuning['name']}: best trial {trial} (validation accuracy "
        f"{best['validation_accuracy'][0]:.4f} over {best['runs'][0]} run(s)); used for every final run",
        highlight=False,
    )
    return dict(point), trial


@campaign_app.command("run")
def campaign_run(
    spec: Annotated[Path, typer.Argument(help="Campaign spec (TOML): see examples/digits-campaign.toml.")],
    store: StoreOpt = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="Run again the runs that already ended.")] = False,
    wait: WaitOpt = 30.0,
) -> None:
    """Run a campaign on this machine: the tuning study, then every grid point x repetition; ingest as it goes.

    Run ids are stable, so running the same spec again only does the runs that have not ended.
    Each run's output goes to <out>/<run_id>.log. Exit code 0 when every run succeeded, 1 otherwise.
    """
    not_ok = _run_campaign(spec, store, rerun, wait)
    raise typer.Exit(1 if not_ok else 0)


def _run_campaign(spec: Path, store: Path | None, rerun: bool, wait: float) -> list[str]:
    """Run a spec locally (tuning, then finals), ingesting as it goes; print the summary; return the failed runs."""
    from honestscale import _output
    from honestscale.campaign import launch
    from honestscale.campaign import spec as _campaign

    s = _campaign.load(spec, _runner_options)
    for framework in s.frameworks():  # every environment is checked before the first run starts
        try:
            launch.check_installed(framework, launch.python_for(framework))
        except launch.LaunchError as exc:
            raise HonestscaleError(
                f"{spec}: {exc}", "create that environment, or drop the framework"
            ) from None
    s.out.mkdir(parents=True, exist_ok=True)
    not_ok: list[str] = []

    total = len(s.plans())
    done = [0]
    started = time.monotonic()

    def execute(plans: list[_campaign.RunPlan], label: str) -> None:
        with Progress(
            TextColumn(f"[bold]{label}[/]"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), TextColumn("{task.fields[now]}"), console=err, disable=not err.is_terminal,
        ) as progress:  # fmt: skip
            task = progress.add_task(label, total=len(plans), now="")
            for plan in plans:
                progress.update(task, now=plan.run_id)
                t0 = time.monotonic()
                ran = rerun or not _campaign.finished(s.out, plan.run_id)
                if ran:
                    log = s.out / f"{plan.run_id}.log"
                    with log.open("w") as sink:
                        argv = plan.runner_argv(s.out, s.name, s.scaling)
                        result = launch.launch(plan.framework, plan.workers, argv, plan.run_id, sink=sink)
                    if result.exit_code != 0:
                        not_ok.append(plan.run_id)
                        err.print(
                            f"[yellow]{escape(plan.run_id)}[/]: exit code {result.exit_code}, see {escape(str(log))}"
                        )
                with _store(store, read_only=False, wait=wait) as con:
                    Ingester(con, campaign=s.name).ingest(discover([str(s.out / plan.run_id)]).sources)
                done[0] += 1
                if (
                    not err.is_terminal
                ):  # a log, not a terminal: one line per run, with the campaign's progress
                    what = f"done in {time.monotonic() - t0:.1f} s" if ran else "already ended, kept"
                    elapsed = time.monotonic() - started
                    err.print(f"[{done[0]}/{total}] {plan.run_id}: {what} (elapsed {elapsed // 60:.0f}:{elapsed % 60:02.0f})",
                              highlight=False, markup=False)  # fmt: skip
                progress.advance(task)

    _record_spec(store, s, wait)
    tuned: dict[str, object] = {}
    trial = None
    if s.tuning is not None:
        execute(_campaign.tuning_plans(s), f"tuning {s.tuning['name']}")
        tuned, trial = _best_trial(store, s, wait)
    execute(_campaign.final_plans(s, tuned, trial), "final runs")
    with _store(store, read_only=True, wait=wait) as con:
        rows = _summary_rows(con, s.name)
    out.print(_output.summary_table(rows))
    if not_ok:
        err.print(f"[yellow]{len(not_ok)} run(s) did not succeed[/]: {escape(', '.join(not_ok))}")
    return not_ok


@app.command()
def advise(
    store: StoreOpt = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    wait: WaitOpt = 10.0,
) -> None:
    """Which setup to use and why: fastest per sample and to the target, where the step time goes (data/I/O,
    compute, communication, optimizer, rank imbalance), projected efficiency at larger worker counts (Amdahl or
    Gustafson, 95 % bootstrap interval over repetitions), and what to try.

    Runs that fail HS101, HS106 or HS110 are excluded, and listed. `--format json` gives every number.
    """
    from honestscale.analysis import advise as _advise
    from honestscale.store import queries

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        advice = _advise.advise(con, campaign)
    if format is ShowFormat.json:
        print(_output.dumps(advice.as_json()))
        return
    for line in _advise.lines(advice):
        out.print(line, highlight=False, soft_wrap=True, markup=False)


@app.command()
def probe(
    model: Annotated[
        str, typer.Option(help="Your model: FILE.py:FUNCTION returning a plain single-device model.")
    ],
    workers: Annotated[str, typer.Option(help="Worker counts to try, comma-separated.")] = "1,2",
    framework: Annotated[
        str | None,
        typer.Option(
            help="Frameworks to try, comma-separated [default: every one whose environment is here and "
            "that takes this model: torch and horovod-torch for an nn.Module, tensorflow and horovod-tf for a "
            "Keras Model]."
        ),
    ] = None,
    dataset: Annotated[
        str, typer.Option(help="digits, synthetic, memmap (with --data-path) or FILE.py:FUNCTION.")
    ] = ("digits"),
    data_path: Annotated[Path | None, typer.Option(help="Folder of a memmap dataset.")] = None,
    samples: Annotated[int, typer.Option(help="Training samples per run (all workers together).")] = 20000,
    batch_size: Annotated[int, typer.Option(help="Global batch (split over the workers).")] = 64,
    warmup_steps: Annotated[
        int, typer.Option(help="First steps of each run flagged as warm-up, not timed.")
    ] = 5,
    repetitions: Annotated[int, typer.Option(help="Runs per point (2+ give projection intervals).")] = 2,
    name: Annotated[str | None, typer.Option(help="Campaign name [default: probe-<model>].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the spec, logs and events.")] = Path(
        "runs"
    ),
    slurm: Annotated[
        bool, typer.Option("--slurm", help="Submit the runs to Slurm, wait for them, collect, then advise.")
    ] = False,
    partition: Annotated[
        str | None, typer.Option(help="With --slurm: the partition [default: Slurm's default one].")
    ] = None,
    account: Annotated[str | None, typer.Option(help="With --slurm: the account to charge.")] = None,
    time_limit: Annotated[str, typer.Option("--time", help="With --slurm: time limit per run.")] = "00:30:00",
    tasks_per_node: Annotated[
        int | None, typer.Option(help="With --slurm: ranks per node [default: every rank on one node].")
    ] = None,
    cpus_per_task: Annotated[int, typer.Option(help="With --slurm: CPU cores per rank.")] = 1,
    gpus_per_task: Annotated[
        int | None, typer.Option(help="With --slurm: GPUs per rank (omit on CPU partitions).")
    ] = None,
    exclusive: Annotated[
        bool,
        typer.Option(
            "--exclusive/--shared",
            help="With --slurm: each run on nodes of its own (sbatch --exclusive), as HS208 asks; --shared lets "
            "runs share nodes with other jobs (measurements then fail HS208).",
        ),
    ] = True,
    poll: Annotated[float, typer.Option(help="With --slurm: seconds between squeue polls.")] = 10.0,
    store: StoreOpt = None,
    wait: WaitOpt = 30.0,
) -> None:
    """Short fixed-size trainings of your model across worker counts and frameworks, then the advisor's verdict.

    Every run trains the same number of samples (--samples; the first --warmup-steps steps are recorded as
    warm-up and left out of the timings), so time and throughput compare across worker counts. The probe
    writes a campaign spec (<out>/<name>.toml, rerun it with `honestscale campaign run`), runs it, ingests
    every run, and prints `honestscale advise`.

    With --slurm the spec gets a [slurm] table from the options below and is submitted (one job array per
    point, every rank started by srun, each run on nodes of its own unless --shared); the probe waits for
    the jobs (squeue/scontrol), collects them (a job Slurm killed is recorded, not dropped) and advises.
    --out must be on a filesystem the compute nodes share. Interrupted while waiting, the jobs keep
    running: `honestscale campaign status|collect <spec>`.

      honestscale probe --model examples/byo/mycnn.py:build --workers 1,2

      honestscale probe --model mycnn.py:build --workers 1,2,4,8 --slurm --partition gpu --gpus-per-task 1 \\
          --tasks-per-node 4 --cpus-per-task 8
    """
    from honestscale.analysis import advise as _advise
    from honestscale.campaign import launch
    from honestscale.campaign import slurm as _slurm
    from honestscale.runners import _usermodel

    slurm_given = [n for n, v in (("--partition", partition), ("--account", account), ("--tasks-per-node",
                   tasks_per_node), ("--gpus-per-task", gpus_per_task)) if v is not None]  # fmt: skip
    if slurm_given and not slurm:
        raise HonestscaleError(
            f"{', '.join(slurm_given)} only apply to Slurm", "add --slurm, or leave them out"
        )
    slurm_table: dict[str, Any] = {}
    if slurm:
        slurm_table = {"partition": partition or _default_partition(), "time": time_limit,
                       "cpus_per_task": cpus_per_task}  # fmt: skip
        slurm_table |= {k: v for k, v in (("account", account), ("tasks_per_node", tasks_per_node),
                        ("gpus_per_task", gpus_per_task)) if v is not None}  # fmt: skip
        if exclusive:
            slurm_table["sbatch"] = ["--exclusive"]

    try:
        counts = sorted({int(w) for w in workers.split(",") if w.strip()})
    except ValueError:
        raise HonestscaleError(f"--workers {workers!r}", "give whole numbers, e.g. --workers 1,2,4") from None
    if not counts or counts[0] < 1:
        raise HonestscaleError(f"--workers {workers!r}", "give worker counts of at least 1, e.g. 1,2,4")
    if not _usermodel.is_spec(model):
        raise HonestscaleError(
            f"--model {model!r} is not FILE.py:FUNCTION", "e.g. --model examples/byo/mycnn.py:build"
        )
    runner_args = ["--model", model, "--dataset", dataset] + (
        ["--data-path", str(data_path)] if data_path else []
    )
    probe_frameworks = ["torch", "horovod-torch", "tensorflow", "horovod-tf"]  # those with --max-samples
    chosen = [f.strip() for f in framework.split(",")] if framework else []
    for f in chosen:
        if f not in probe_frameworks:
            raise HonestscaleError(f"--framework {f}: probe runs {', '.join(probe_frameworks)}",
                                   "train other frameworks with honestscale run or a campaign")  # fmt: skip
    usable, other_family = [], []
    for f in chosen or probe_frameworks:
        try:
            python = launch.python_for(f)
            launch.check_installed(f, python)
        except launch.LaunchError as exc:
            if chosen:
                raise HonestscaleError(
                    str(exc), "create that environment or leave the framework out"
                ) from None
            err.print(f"skipping {f}: {exc}", highlight=False)
            continue
        if slurm:
            try:  # the compute nodes' interpreter is this environment's: can it start this framework there?
                _slurm.check_framework(_slurm.SlurmSpec(**slurm_table), f)
            except HonestscaleError as exc:
                if chosen:
                    raise
                err.print(f"skipping {f} on Slurm: {exc.message}", highlight=False)
                continue
        try:
            launch.check_user_files(f, python, runner_args)
        except launch.WrongFamily as exc:  # a Keras model is not probed with torch, nor the reverse
            if chosen:
                raise HonestscaleError(str(exc), "leave that framework out; no run was started") from None
            other_family.append(f"{f}: {exc}")
            continue
        except launch.LaunchError as exc:
            raise HonestscaleError(str(exc), "fix the model file; no run was started") from None
        usable.append(f)
    if not usable:
        raise HonestscaleError(
            "no framework environment can run this model here"
            + "".join(f"\n  {line}" for line in other_family),
            "see README: Framework environments",
        )
    campaign = name or f"probe-{_usermodel.label(model)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    if dataset == "digits":  # read from files, as real training reads its data: I/O is part of what is probed
        data_path, dataset = _stage_digits(out_dir / "digits-npy"), "memmap"
    spec = out_dir / f"{campaign}.toml"
    absolute = {  # the spec lives in --out: user files are named by absolute path
        "model": _usermodel.resolved(model),
        "dataset": _usermodel.resolved(dataset) if _usermodel.is_spec(dataset) else dataset,
    }
    args = {**absolute, "batch_size": batch_size, "max_samples": samples, "epochs": 1000,
            "warmup_steps": warmup_steps, "eval_every": 1000, "sample_interval": 0.5}  # fmt: skip
    if data_path:
        args["data_path"] = str(data_path.resolve())
    spec.write_text(_probe_spec(campaign, repetitions, args, usable, counts, slurm_table), encoding="utf-8")
    err.print(f"probe {campaign}: {len(usable)} framework(s) x {len(counts)} worker count(s) x {repetitions} "
              f"run(s) of {samples:,} samples{' on Slurm' if slurm else ''}; spec {spec}", highlight=False)  # fmt: skip
    if slurm:
        _submit_campaign(spec, store, dry_run=False, arrays=True, wait=wait)
        try:
            _wait_for_jobs(spec, store, wait, poll)
        except KeyboardInterrupt:
            err.print(f"stopped waiting; the jobs go on running: follow with `honestscale campaign status {spec}`, "
                      f"then `honestscale campaign collect {spec}` and `honestscale advise --campaign {campaign}`",
                      highlight=False)  # fmt: skip
            raise typer.Exit(130) from None
        _collect_campaign(spec, store, wait)
        with _store(store, read_only=True, wait=wait) as con:
            not_ok = campaigns.runs_not_ok(con, campaign)
    else:
        not_ok = _run_campaign(spec, store, False, wait)
    from honestscale.store import queries

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        advice = _advise.advise(con, campaign)
    out.print("\nverdict", style="bold")
    for line in _advise.lines(advice):
        out.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(1 if not_ok else 0)


def _stage_digits(folder: Path) -> Path:
    """scikit-learn's digits, split as every runner splits it, saved as a memmap dataset (NumPy files)."""
    import numpy as np

    from honestscale.runners._data import digits_arrays

    folder.mkdir(parents=True, exist_ok=True)
    for split, (x, y) in digits_arrays().items():
        np.save(folder / f"{split}_x.npy", x)
        np.save(folder / f"{split}_y.npy", y)
    return folder


def _default_partition() -> str:
    """Slurm's default partition (sinfo marks it with *)."""
    from honestscale.campaign import slurm as _slurm

    names = _slurm.command(["sinfo", "-h", "-o", "%P"], "sinfo").split()
    default = [n.rstrip("*") for n in names if n.endswith("*")]
    if not default:
        raise HonestscaleError(
            f"this Slurm has no default partition (sinfo: {', '.join(names) or 'none'})", "give --partition"
        )
    return default[0]


def _probe_spec(
    name: str,
    repetitions: int,
    args: dict[str, Any],
    frameworks: list[str],
    workers: list[int],
    slurm: dict[str, Any] | None = None,
) -> str:
    def toml(v: Any) -> str:
        return json.dumps(v)  # strings, numbers and lists of them are the same in TOML and JSON

    lines = [
        "# written by honestscale probe: short fixed-size trainings of one model",
        "[campaign]",
        f"name = {toml(name)}",
        'out = "."',
        f"repetitions = {repetitions}",
        'scaling = "strong"',
        "",
        "[args]",
    ]
    lines += [f"{k} = {toml(v)}" for k, v in args.items()]
    lines += ["", "[grid]", f"framework = {toml(frameworks)}", f"workers = {toml(workers)}", "",
              "[tool.honestscale.lint]",
              'ignore = [{ code = "HS110", reason = "a probe trains a fixed number of samples on purpose: it measures '
              'where step time goes, not time to a converged model" }]']  # fmt: skip
    if slurm:
        lines += ["", "[slurm]", *(f"{k} = {toml(v)}" for k, v in slurm.items())]
    return "\n".join(lines) + "\n"


class LintFormat(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


@app.command()
def lint(
    store: StoreOpt = None,
    format: Annotated[LintFormat, typer.Option("--format", "-f", help="text, json or sarif (2.1.0).")] = (
        LintFormat.text
    ),
    select: Annotated[
        list[str] | None, typer.Option(help="Only these rules (HS101, or a prefix: HS1).")
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option(help="Skip these rules for this call (no justification kept).")
    ] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="honestscale.toml with [tool.honestscale.lint] suppressions [default: ./honestscale.toml if present]."
        ),
    ] = None,
    explain: Annotated[
        str | None, typer.Option("--explain", help="Print what a rule checks, why, and the fix.")
    ] = None,
    rules_doc: Annotated[
        bool, typer.Option("--rules-doc", help="Print the rules page (docs/rules.md).")
    ] = False,
    wait: WaitOpt = 10.0,
) -> None:
    """Check runs and comparisons against the twelve ways to fool the masses and the SC15 rules.

    Runs are grouped into comparisons (repetitions of a configuration, scaling series, framework and
    hardware comparisons, campaigns); every rule reports, per comparison, fail or cannot verify (with what
    to record) and the evidence. Suppress a rule for a campaign only with a reason, in the campaign spec
    or a honestscale.toml: [tool.honestscale.lint] ignore = [{ code = "HS106", reason = "..." }].

    Exit code 1 when an error-severity rule fails, 0 otherwise.
    """
    from honestscale import lint as linter
    from honestscale.lint import _config, _formats

    if explain:
        try:
            print(_formats.explain(explain), end="")
        except KeyError:
            raise HonestscaleError(f"no rule {explain!r}", "see honestscale lint --rules-doc") from None
        return
    if rules_doc:
        print(_formats.rules_markdown(), end="")
        return
    extra = []
    if config is not None or Path("honestscale.toml").is_file():
        extra = _config.load_file(config or Path("honestscale.toml"))
    from honestscale.store import queries

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        result = linter.lint(con, campaign=campaign, select=select, ignore=ignore, suppressions=extra)
    if format is LintFormat.json:
        print(_output.dumps(_formats.as_json(result)))
    elif format is LintFormat.sarif:
        print(_output.dumps(_formats.as_sarif(result)))
    else:
        out.print(_formats.as_text(result))
    raise typer.Exit(1 if result.errors else 0)


class ReportFormat(StrEnum):
    pdf = "pdf"
    json = "json"


@app.command()
def report(
    store: StoreOpt = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="The PDF to write.")] = Path("report.pdf"),
    html: Annotated[Path | None, typer.Option("--html", help="Also write the report as HTML here.")] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[
        ReportFormat, typer.Option("--format", "-f", help="pdf, or json: the analysis model.")
    ] = (ReportFormat.pdf),
    config: Annotated[Path | None, typer.Option(help="honestscale.toml with lint suppressions.")] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """The paper-ready scaling report: PDF (and HTML), figures, tables, the lint verdicts.

    Per scaling series: medians with 95 % order-statistic intervals, speedup and efficiency against
    the base case (printed with its absolute time), Amdahl or Gustafson bounds, step breakdown,
    accuracy at every scale, the MLPerf score for MLPerf logs; every rule's verdict with the
    justification of suppressed ones; every run, tuning and failed ones included. The folder
    <output>_files/ holds the figures (PDF, SVG) and tables (CSV, LaTeX booktabs) for a paper.
    `--format json` prints the numbers behind every table and figure instead.
    """
    from honestscale import report as reporting
    from honestscale.lint import _config

    extra = []
    if config is not None or Path("honestscale.toml").is_file():
        extra = _config.load_file(config or Path("honestscale.toml"))
    from honestscale.store import queries

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        if queries.run_count(con) == 0:
            raise HonestscaleError(
                f"the store {resolve_store_path(store)} holds no runs: there is nothing to report",
                "ingest runs first (honestscale ingest PATH, or honestscale campaign run SPEC), or give --store",
            )
        if format is ReportFormat.json:
            model, _ = reporting.analyse(con, campaign, extra)
            print(_output.dumps(model.as_json()))
            return
        if not output.parent.exists():
            raise HonestscaleError(
                f"folder {output.parent} does not exist", "create it or choose another --output"
            )
        outputs = reporting.report(con, pdf=output, html=html, campaign=campaign, suppressions=extra)
    err.print(
        f"wrote {output} (and {len(outputs.exports)} figure and table files in {outputs.assets})",
        highlight=False,
    )
    if html is not None:
        err.print(f"wrote {html}", highlight=False)
    if outputs.refused:
        err.print(
            f"[yellow]refused to fetch {len(outputs.refused)} URL(s) that are not the report's own assets[/]"
        )


def _load_slurm_campaign(spec: Path) -> tuple[Any, Any]:
    from honestscale.campaign import slurm as _slurm
    from honestscale.campaign import spec as _campaign

    s = _campaign.load(spec, _runner_options)
    return s, _slurm.parse(s)


@campaign_app.command("submit")
def campaign_submit(
    spec: Annotated[Path, typer.Argument(help="Campaign spec (TOML) with a [slurm] table.")],
    store: StoreOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the sbatch scripts; submit nothing.")
    ] = False,
    arrays: Annotated[bool, typer.Option(help="Repetitions of a point as one job array.")] = True,
    wait: WaitOpt = 30.0,
) -> None:
    """Submit a campaign to Slurm: one job array per grid point (a task per repetition), one srun per run.

    Everything is checked first (keys, partition, shapes, the framework on the [slurm] python); nothing is
    submitted if anything is wrong. With a [tuning] study, the trials are submitted first; run submit
    again once they have ended and been collected: it then submits the final runs with the best trial.
    The scripts, job ids and the plan are recorded in the store.
    """
    _submit_campaign(spec, store, dry_run=dry_run, arrays=arrays, wait=wait)


def _submit_campaign(spec: Path, store: Path | None, *, dry_run: bool, arrays: bool, wait: float) -> int:
    """campaign submit: check everything, then sbatch the runs not submitted yet; the number of jobs."""
    from honestscale.campaign import slurm as _slurm
    from honestscale.campaign import spec as _campaign

    s, sl = _load_slurm_campaign(spec)
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
    plans = [p for p in _campaign.tuning_plans(s) if p.run_id not in submitted]
    stage = "tuning trials"
    if not plans:
        tuned: dict[str, object] = {}
        trial = None
        if s.tuning is not None:
            tuned, trial = _best_trial(store, s, wait)
        plans = [p for p in _campaign.final_plans(s, tuned, trial) if p.run_id not in submitted]
        stage = "final runs"
    jobs = _slurm.scripts(
        s, sl, plans, arrays=arrays
    )  # shapes are checked here, before anything is submitted
    if dry_run:
        for job in jobs:
            print(f"# --- {job.point}: {len(job.plans)} run(s) ---")
            print(job.script)
        return 0
    if not jobs:
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


@app.command()
def contract(
    json_schema: Annotated[
        bool, typer.Option("--json-schema", help="Print the JSON Schema of the events.")
    ] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the field reference as Markdown.")
    ] = False,
) -> None:
    """The event contract runners write: every kind and field (docs/events.md is this output)."""
    if json_schema:
        print(json.dumps(ev.json_schema(), indent=2))
    else:
        text = ev.markdown_reference()
        if markdown:
            print(text)
        else:
            from rich.markdown import Markdown

            out.print(Markdown(text))


@app.command()
def migrate(store: StoreOpt = None, wait: WaitOpt = 30.0) -> None:
    """Create the store, or upgrade it to this version's schema (ingest does this too)."""
    with _store(store, read_only=False, wait=wait) as con:
        version = campaigns.schema_version(con)
    print(f"store at schema version {version if version is not None else '?'}")


def main() -> None:
    try:
        app()
    except HonestscaleError as exc:
        err.print(f"[red]error[/]: {escape(exc.message)}", highlight=False)
        if exc.fix:
            err.print(f"  [bold]fix[/]: {escape(exc.fix)}", highlight=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
