"""Commands on the store: ingest (and --watch; what it prints as it goes in _ingest_output), runs, show, quarantine,
contract, migrate."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from honestscale import events as ev
from honestscale.cli._app import (
    EXIT_OK,
    EXIT_QUARANTINED,
    QuarantineFormat,
    ShowFormat,
    StoreOpt,
    TableFormat,
    WaitOpt,
    _store,
    app,
    err,
    out,
)
from honestscale.cli._ingest_output import report_file, report_skipped, run_ingest
from honestscale.collector import Ingester, Summary, discover, stale
from honestscale.collector.watch import Watcher
from honestscale.errors import HonestscaleError
from honestscale.files import interrupt_answered
from honestscale.store import campaigns, interrupted

if TYPE_CHECKING:
    pass


class _Stop(Exception):
    pass


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


def _watch(
    folder: Path,
    store: Path | None,
    campaign: str | None,
    interval: float,
    wait: float,
    quiet: bool,
    follow: list[Path],
) -> int:
    # Hold the store only while ingesting, so `runs`, `report` and `lint` can read it in between.
    watcher = Watcher(folder, lambda: _store(store, read_only=False, wait=wait), campaign, follow)
    signal.signal(signal.SIGTERM, _on_term)
    err.print(f"watching {folder} every {interval:g} s; Ctrl-C to stop")
    total = Summary()
    try:
        while True:
            poll = watcher.poll()
            for problem in poll.problems:
                err.print(
                    f"{time.strftime('%H:%M:%S')} [yellow]not landed yet[/]: {escape(problem.message)}",
                    highlight=False,
                )
                err.print(f"  {escape(problem.fix or '')}; the watcher goes on and tries again every poll",
                          highlight=False)  # fmt: skip
            for result in poll.landed:
                report_file(result, quiet)
                total.files.append(result)
            if poll.summary is not None and poll.summary.changed and not quiet:
                err.print(f"{time.strftime('%H:%M:%S')} {poll.summary.line()}")
            time.sleep(interval)
    except (KeyboardInterrupt, _Stop):
        interrupt_answered()
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
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Also print each file as it lands (its batch committed) and its notes."
        ),
    ] = False,
    follow_links: Annotated[
        list[Path] | None,
        typer.Option(
            "--follow-links",
            help="Open the links that resolve under this folder (repeatable); a link "
            "out of the paths given is otherwise named, never opened.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Land event files, MLPerf logs and other tools' logs in the store: idempotent, incremental, atomic per file,
    lossless. Ingesting the same files again adds nothing; a file that grew adds only its new events; a file lands
    whole or not at all, so after a crash or kill the next ingest completes the job; every line that cannot be
    parsed goes to the quarantine with its file, line number and reason.

    An event whose run id, rank and seq are already stored is skipped when it is the same line (a
    copy of a file) and is a conflict when it differs (two runs claiming one id): nothing stored is
    replaced, and that run's events from the conflicting file go to the quarantine, naming the other file.
    Every file found that does not land is named with its reason (MLPerf system descriptions, power logs
    and scaling.json files, read with the logs beside them, only with --verbose).

    Your own loop writes event files with honestscale.record (docs/record.md); other tools' logs are chosen by
    content, named with -v: torchtitan, Megatron-LM, DLLogger, trainer_state.json (docs/readers.md).

    Exit codes: 0 all landed; 3 landed, but some lines are quarantined (conflicts included), or a file
    holding MLPerf or event lines landed nothing (a format or a log its reader does not know), or an MLPerf system
    description could not be read, or a file was refused (not a regular file, more than HONESTSCALE_MAX_FILE_MB,
    or a .gz decompressing past HONESTSCALE_MAX_GZIP_RATIO times its size: a gzip bomb); 2 bad usage or
    unreadable input; 75 the store is held by another process past --wait, or its disk or catalog is unavailable:
    run it again later. A link that resolves outside the paths given is never opened (listed with -v).

    Examples:

      honestscale ingest runs/                       # every events-rank*.jsonl below runs/

      honestscale ingest results/*/resnet/result_*.txt --campaign mlperf-v0.7

      honestscale ingest --watch /scratch/$USER/campaign   # while the jobs run

      honestscale ingest slurm-4242.out outputs/ -v   # Megatron's, torchtitan's ... logs
    """
    if watch is not None:
        if paths:
            raise HonestscaleError("give either PATHs or --watch FOLDER, not both", "run two commands")
        raise typer.Exit(_watch(watch, store, campaign, interval, wait, quiet, follow_links or []))
    if not paths:
        raise HonestscaleError(
            "nothing to ingest: give files, folders or globs", "e.g. honestscale ingest runs/  (see --help)"
        )
    found = discover(paths, follow_links or [])
    if not found.sources and any(k.lost for k in found.skipped):
        nothing = Summary(skipped=found.skipped)
        report_skipped(nothing, verbose)
        print(nothing.line())
        raise typer.Exit(EXIT_QUARANTINED)
    if not found.sources:
        raise HonestscaleError(
            f"no event files or MLPerf logs in {', '.join(paths)} ({len(found.skipped)} other files)",
            "runners write <run_id>/events-rank<N>.jsonl, and so does your own training loop with "
            "honestscale.record (docs/record.md); MLPerf logs hold ':::MLLOG' lines",
        )
    with _store(store, read_only=False, wait=wait) as con:
        ingester = Ingester(con, campaign=campaign, force=force)
        try:
            summary = run_ingest(ingester, found.sources, quiet, verbose)
        except (KeyboardInterrupt, Exception) as exc:  # DuckDB reports Ctrl-C as its own error
            if not interrupted(exc):
                raise
            interrupt_answered()  # the store's close (after this) keeps what landed: a second press waits for it
            err.print("[red]interrupted[/]: finished files landed, the rest rolled back: ingest again")
            raise typer.Exit(130) from None
        summary.stale = stale(con)
    summary.skipped = found.skipped
    report_skipped(summary, verbose)
    print(summary.line())
    raise typer.Exit(EXIT_QUARANTINED if summary.quarantined or summary.not_landed() else EXIT_OK)


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
    time_to_train_s, time_to_accuracy_s with the target it refers to, final_accuracy {split, metric, value} or
    null (the final quality: an accuracy, or a loss), source_file, rejected, the parallel layout (layout "dp2,tp2",
    parallel {dp, fsdp, tp, pp, cp, ep}) and the run's rates (samples_per_s, tokens_per_s, each per worker too,
    rates_are saying which statistic), ...); CSV the same columns (the target and rejected as text).

    Times that are no measurement (HS213: run_stop before run_start, a clock gone backwards, a rank missing) are
    never printed as one: marked "✗ HS213" in the table, null in JSON and CSV, with the rule, why and the values
    in "rejected".
    """
    from honestscale.cli import _output
    from honestscale.judged import Judged
    from honestscale.store import queries  # polars: only the reading commands need it
    from honestscale.view import listing

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        df = queries.runs(con, campaign)
        runs, view = listing(con, campaign)
        if format is not TableFormat.table:
            df = _output.with_energy(df, _energies(con, campaign))
    targets = _output.reached(runs) if format is not TableFormat.table else {}
    rejected = _output.rejected_times(Judged(view, campaign).lint_of(select=["HS213"]).findings)
    if format is TableFormat.json:
        print(_output.dumps(_output.run_records(df, targets, rejected, _output.layouts(runs))))
    elif format is TableFormat.csv:
        sys.stdout.write(_output.runs_csv(df, targets, rejected))
    elif df.height == 0:
        err.print("no runs in the store yet: `honestscale ingest PATH` first")
    else:
        out.print(_output.runs_table(df, rejected))


def _energies(con: Any, campaign: str | None) -> dict[str, dict[str, Any]]:
    """Each run's energy to train as `show` and the report give it (analysis.energy, the one place it is chosen)."""
    from honestscale.analysis import energy
    from honestscale.store import queries
    from honestscale.view import concerning, energy_records, power_samples

    power, records = power_samples(con, campaign), energy_records(con)
    rows = queries.lint_runs(con, campaign, with_superseded=True).iter_rows(named=True)
    return {r["run_id"]: energy.of_run(r, power.get(r["run_id"], []), concerning(r, records)) for r in rows}


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="Run id, or any part of it that names one run.")],
    store: StoreOpt = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    ranks: Annotated[bool, typer.Option("--ranks", help="List every rank, not a summary of many.")] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            help="honestscale.toml with \\[tool.honestscale.lint] suppressions \\[default: ./honestscale.toml if present]."
        ),
    ] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """One run: the rules' verdicts about it, what it ran on, its evaluations, where its step time went, and lost
    events. A run of more than 16 ranks shows the slowest and fastest and the spread (--ranks: every rank; JSON
    holds them all).

    The verdicts are the lint's findings that name this run, judged with its campaign (as the dashboard's run page
    shows them; JSON: "verdicts" {judged_with, findings [{code, severity, outcome, message, evidence, fix,
    suppressed}]}); a run of no campaign is judged with the store's other runs of none, as `lint` judges it."""
    from honestscale import lint as linter
    from honestscale.cli import _output, _show
    from honestscale.judged import run_of
    from honestscale.store import queries  # polars: only the reading commands need it

    suppressions = linter.load_config(config)
    with _store(store, read_only=True, wait=wait) as con:
        record = run_of(con, queries.resolve_run_id(con, run_id), suppressions=suppressions)
    if format is ShowFormat.json:
        print(_output.dumps(record.as_json()))
    else:
        out.print(_show.show_renderable(record, all_ranks=ranks))


@app.command()
def quarantine(
    store: StoreOpt = None,
    format: Annotated[QuarantineFormat, typer.Option("--format", "-f")] = QuarantineFormat.table,
    file: Annotated[Path | None, typer.Option("--file", help="Only lines of this file.")] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """Lines that could not land: file, line number, reason and the raw text. JSON: \\[{file, line, reason, raw}]."""
    from honestscale.cli import _output
    from honestscale.store import queries  # polars: only the reading commands need it

    with _store(store, read_only=True, wait=wait) as con:
        df = queries.quarantine(con, str(file.resolve()) if file else None)
    if format is QuarantineFormat.json:
        print(_output.dumps(_output.quarantine_records(df)))
    elif df.height == 0:
        err.print("the quarantine is empty: every line landed")
    else:
        out.print(_output.quarantine_table(df))


@app.command()
def profiles(
    store: StoreOpt = None,
    format: Annotated[QuarantineFormat, typer.Option("--format", "-f")] = QuarantineFormat.table,
    wait: WaitOpt = 10.0,
) -> None:
    """PyTorch profiler (Kineto) traces in the store, those linked to no run first: each trace's run, rank and
    device, its profiled steps, and the share of their summed time the device was busy and the collectives were in
    flight (and exposed). JSON: \\[{path, run_id, rank, world_size, backend, device, steps, t_steps, t_busy,
    t_idle, t_comm, t_comm_exposed}], times in seconds summed over the profiled steps. `show RUN` lists a linked
    run's steps one by one."""
    from honestscale.cli import _output, _show
    from honestscale.store import queries  # polars: only the reading commands need it

    with _store(store, read_only=True, wait=wait) as con:
        df = queries.profiles(con)
    if format is QuarantineFormat.json:
        print(_output.dumps(df.to_dicts()))
    elif df.height == 0:
        err.print(
            "no profiler trace in the store: `honestscale ingest` a trace (torch.profiler's export) first"
        )
    else:
        out.print(_show.profiles_table(df))


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
