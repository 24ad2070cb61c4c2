"""What ``honestscale ingest`` prints as it goes: each file's warnings, conflicts and (with -v) its landing, the
progress bar on a terminal (a plain line every PLAIN_EVERY seconds elsewhere: a batch job's log), and at the end
every file that did not land, by reason."""

from __future__ import annotations

import time
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from honestscale.cli._app import err
from honestscale.collector import NOT_RESULTS, FileResult, Ingester, Source, Summary
from honestscale.display import shown, shown_text


def _path(path: Path) -> str:
    """A path as printed: its bidirectional controls and invisible characters as visible escapes, no markup."""
    return escape(shown(path))


def report_file(result: FileResult, quiet: bool, verbose: bool = False) -> None:
    if quiet:
        return
    for warning in result.warnings:
        err.print(f"[yellow]warning[/] {_path(result.path)}: {escape(shown_text(warning))}", highlight=False)
    if verbose:
        if result.action not in ("unchanged", "kept", "refused"):  # committed: a kill from here on keeps it
            err.print(
                f"landed {_path(result.path)}: {result.events} events ({result.action})",
                highlight=False,
            )
        for note in result.notes:
            err.print(f"note {_path(result.path)}: {escape(shown_text(note))}", highlight=False)
    elif result.nothing_to_land and result.action != "unchanged":  # said without -v: no run came of the file
        err.print(f"note {_path(result.path)}: {escape(shown_text(result.nothing_to_land))}", highlight=False)
    if result.conflicts:
        err.print(
            f"[red]conflict[/] {_path(result.path)}: {result.conflicts} event(s) claim a run id, rank and seq "
            "already stored from another file with different content; that run's events from this file are in "
            "the quarantine, the stored run is unchanged (see `honestscale quarantine --file`)",
            highlight=False,
        )
    if result.action != "unchanged" and result.quarantined:
        err.print(
            f"[yellow]warning[/] {_path(result.path)}: {result.quarantined} line(s) quarantined "
            "(see `honestscale quarantine`)"
        )


def _progress(total: int) -> Progress:
    return Progress(TextColumn("[bold]ingest[/]"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                    TextColumn("{task.fields[file]}"), console=err, transient=True, disable=not err.is_terminal)  # fmt: skip


PLAIN_EVERY = 30.0  # seconds between the plain progress lines printed where stderr is not a terminal


def run_ingest(ingester: Ingester, sources: list[Source], quiet: bool, verbose: bool) -> Summary:
    sizes = {s.path: s.path.stat().st_size for s in sources}
    total, done, files, start = sum(sizes.values()), 0, 0, time.monotonic()
    last = start
    with _progress(total) as progress:
        task = progress.add_task("ingest", total=total, file="")

        def advance(source: Source, result: FileResult) -> None:
            nonlocal done, files, last
            # a file read again (one read with it changed), or one not given but read again for such a file, is
            # not counted twice: the bar is of the files given
            given = source.path in sizes
            size = sizes.pop(source.path, 0)
            done, files = done + size, files + given
            progress.update(task, advance=size, file=escape(shown(source.path.name)))
            report_file(result, quiet, verbose)
            if not (quiet or err.is_terminal) and (now := time.monotonic()) - last >= PLAIN_EVERY:
                last = now
                err.print(f"ingest: {files} of {len(sources)} file(s) read, {done / 1e6:.1f} of {total / 1e6:.1f} "
                          f"MB, {now - start:.0f} s", highlight=False)  # fmt: skip

        return ingester.ingest(sources, advance=advance)


def report_skipped(summary: Summary, verbose: bool) -> None:
    """Every file that did not land, by reason (files read with the logs beside them and links not opened only with
    --verbose);
    then the files that hold results and landed nothing, which make the exit code 3."""
    by_reason: dict[str, list[Path]] = {}
    for k in summary.skipped:
        if verbose or not (k.beside or k.link):
            by_reason.setdefault(k.reason, []).append(k.path)
    for reason, paths in by_reason.items():
        err.print(f"not landed, {escape(reason)} ({len(paths)}):", highlight=False)
        for path in paths:
            err.print(f"  {_path(path)}", highlight=False)
        if reason == NOT_RESULTS:
            err.print("  (your own training writes event files with honestscale.record: see docs/record.md)",
                      highlight=False)  # fmt: skip
    if (note := summary.stale_note()) is not None:
        err.print(f"[yellow]warning[/] {escape(shown_text(note))}", highlight=False)
    lost = summary.not_landed()
    if lost:
        err.print(f"[red]error[/] {len(lost)} file(s) hold results that did not land:", highlight=False)
        for path, why in lost:
            err.print(f"  {_path(path)}: {escape(shown_text(why))}", highlight=False)
        err.print(
            "fix: as each says (a file in a format this reader does not know: convert or remove it, or report "
            "the format); everything else has landed",
            highlight=False,
        )
