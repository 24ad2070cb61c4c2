"""The application object, the consoles and the options every command shares."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from honestscale import __version__, exits
from honestscale import events as ev
from honestscale.store import DATA_PATH_ENV, STORE_ENV, Connection, open_store, ready_for_arrow

if TYPE_CHECKING:
    from honestscale.judged import Judged

app = typer.Typer(
    name="honestscale",
    help=(
        "Results store, honest-metrics linter and scaling reports for distributed deep-learning training.\n\n"
        "Runners (`run`, `campaign run`) write events, one JSONL file per rank; `ingest` lands them, MLPerf "
        "result logs of every round and the logs other tools write, in a store (a DuckDB file, or a centre's "
        "DuckLake); `runs`, `show`, `summary` read it, `lint` judges it, `report` writes the paper-ready analysis, "
        "`compare` gates CI, `serve` shows it live."
    ),
    epilog=exits.markdown(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
if not out.is_terminal:
    out = Console(width=200)
err = Console(stderr=True, soft_wrap=True)


EXIT_OK, EXIT_USAGE, EXIT_QUARANTINED = (
    exits.OK,
    exits.USAGE,
    exits.CANNOT_JUDGE,
)  # the table: honestscale.exits


StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        envvar=STORE_ENV,
        help="The store: a DuckDB file (default: ./honestscale.duckdb in the current folder), or a centre's "
        "DuckLake, ducklake:postgres:'dbname=hs host=db user=hs' (password from PGPASSWORD or ~/.pgpass).",
        show_default=False,
    ),
]


UntilCiOpt = Annotated[
    str | None,
    typer.Option(
        "--until-ci",
        metavar="FRACTION",
        help="Add repetitions of each point until the 95 % interval of its median time is within this fraction of "
        "the median, e.g. 5% or 0.05 (SC15 rule 5); overrides the spec's \\[campaign] until_ci.",
    ),
]
MaxRepsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-repetitions",
        metavar="N",
        help="With --until-ci: stop adding repetitions at N runs of a point (default: \\[campaign] max_repetitions, "
        "else 20).",
    ),
]
WaitOpt = Annotated[
    float,
    typer.Option(
        "--wait", help="Seconds to wait for another process that holds the store, before giving up."
    ),
]
PoolOpt = Annotated[
    bool,
    typer.Option(
        "--pool",
        help="Pool the runs of one setup across campaigns, as repetitions of it (default: each campaign on its own "
        "runs); the output names the campaigns pooled, and the rules judge the pooled runs.",
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
    data_path: Annotated[
        str | None,
        typer.Option(
            "--data-path",
            envvar=DATA_PATH_ENV,
            help="A new DuckLake store's data folder (its Parquet files; every node must reach it): given when the "
            "store is created (migrate, or the first ingest), kept in its catalog after that.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """honestscale: honest numbers for distributed deep-learning training."""
    if store is not None:  # read by the command's own --store (its environment variable) unless it gives one
        os.environ[STORE_ENV] = str(store)
    if data_path is not None:
        os.environ[DATA_PATH_ENV] = data_path


@contextlib.contextmanager
def _store(store: Path | None, *, read_only: bool, wait: float = 10.0) -> Iterator[Connection]:
    if not read_only:  # a writer (ingest, its --watch, campaign run) hands DuckDB Arrow tables
        ready_for_arrow()
    con = open_store(
        store, read_only=read_only, wait_s=wait, on_wait=lambda m: err.print(f"[yellow]{escape(m)}[/]")
    )
    try:
        yield con
    finally:
        con.close()


def judged(
    store: Path | None, campaign: str | None = None, *, wait: float = 10.0, suppressions: Sequence[Any] = ()
) -> Judged:
    """The judged model of the selection (``honestscale.judged``), saying on stderr while it waits for a writer."""
    from honestscale.judged import judged as judge

    say_wait = lambda m: err.print(f"[yellow]{escape(m)}[/]")  # noqa: E731
    return judge(store, campaign, suppressions=suppressions, wait=wait, on_wait=say_wait)


def say(message: str) -> None:
    """A plain line on stderr for the user (no markup, no highlighting): what orchestration asks to be said."""
    err.print(message, highlight=False, markup=False)


campaign_app = typer.Typer(help="Campaigns: grids of runs described in a TOML spec.", no_args_is_help=True)


app.add_typer(campaign_app, name="campaign")


class LintFormat(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


class Tracker(StrEnum):
    """A tracker whose runs the lint can annotate (lint --annotate)."""

    mlflow = "mlflow"
    wandb = "wandb"


class ReportFormat(StrEnum):
    pdf = "pdf"
    json = "json"
