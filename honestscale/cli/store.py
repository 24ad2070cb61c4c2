"""Commands that read the store: runs, show, quarantine, profiles, the event contract, and migrate."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from honestscale import events as ev
from honestscale.cli._app import (
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
from honestscale.store import campaigns


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
    from honestscale.judged import listed

    details = format is not TableFormat.table
    with _store(store, read_only=True, wait=wait) as con:
        got = listed(con, campaign, details=details)
    df = _output.with_energy(got.frame, got.energies) if details else got.frame
    if format is TableFormat.json:
        print(_output.dumps(_output.run_records(df, got.reached, got.rejected, got.layouts)))
    elif format is TableFormat.csv:
        sys.stdout.write(_output.runs_csv(df, got.reached, got.rejected))
    elif df.height == 0:
        err.print("no runs in the store yet: `honestscale ingest PATH` first")
    else:
        out.print(_output.runs_table(df, got.rejected))


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
    from honestscale.cli import _output, _show
    from honestscale.judged import load_config, run_of
    from honestscale.store import queries  # polars: only the reading commands need it

    suppressions = load_config(config)
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
