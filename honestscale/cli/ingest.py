"""``honestscale ingest`` (and ``--watch``): event files, MLPerf logs and other tools' logs landed in the store
(what it prints as it goes: ``_ingest_output``)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.markup import escape

from honestscale.cli._app import EXIT_OK, EXIT_QUARANTINED, StoreOpt, WaitOpt, _store, app, err
from honestscale.cli._ingest_output import report_file, report_skipped, run_ingest
from honestscale.collector import Ingester, Summary, discover, interrupted, stale
from honestscale.collector.watch import Watcher
from honestscale.errors import HonestscaleError
from honestscale.files import interrupt_answered


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
