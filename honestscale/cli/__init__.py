"""The ``honestscale`` command: each module parses one group of commands, calls one function of the one package it
fronts (an import-linter contract, ``fronts`` in pyproject.toml, names it) and prints.

``_app`` (the application, consoles, shared options), ``ingest`` (and --watch), ``store`` (runs, show, quarantine,
profiles, contract, migrate), ``analysis`` (summary, advise), ``lint``, ``report``, ``campaign`` (run, campaign run),
``slurm`` (campaign submit, status, collect, resubmit), ``probe``, ``predict``, ``compare`` (A against B, the gate,
history), ``serve`` (the dashboard), ``centre``, ``claims``; ``_output`` (tables, JSON and CSV of what they print),
``_show``, ``_summary``, ``_annotate``, ``_ingest_output`` (what ingest prints as it goes).
"""

from __future__ import annotations

import gc
import sys
from typing import NoReturn

import typer
from rich.markup import escape

# isort: off
# Importing a module registers its commands; --help lists them in this order.
from honestscale.cli import ingest, store, analysis, lint, report, campaign, predict, compare  # noqa: F401
from honestscale.cli import serve, probe, slurm, centre, claims  # noqa: F401

# isort: on
from honestscale import exits
from honestscale.cli._app import app, err
from honestscale.display import shown_text
from honestscale.errors import HonestscaleError, from_os_error
from honestscale.files import interrupt_answered
from honestscale.store import as_store_error, interrupted
from honestscale.store import shown as masked

__all__ = ["app", "main"]


def _unanswered_interrupt(done: SystemExit) -> bool:
    """Ctrl-C that no command answered: typer turns the KeyboardInterrupt into a silent exit 130 (its Exit raised
    from the KeyboardInterrupt), where the user must be told what was kept."""
    stopped = done.__context__
    return (
        done.code == exits.INTERRUPTED
        and isinstance(stopped, typer.Exit)
        and isinstance(stopped.__cause__, KeyboardInterrupt)
    )


def _answer_interrupt() -> NoReturn:
    interrupt_answered()
    err.print("[red]interrupted[/]: what had finished is kept; the rest was rolled back", highlight=False)
    sys.exit(exits.INTERRUPTED)


def main() -> None:
    # What the imports made lives as long as the command: the cyclic collector need not walk it again, neither in
    # the command's collections nor at exit (perf: the collector's share of an ingest's CPU 3.0 % -> 1.5 %)
    gc.freeze()
    try:
        app()
    except SystemExit as done:
        if _unanswered_interrupt(done):
            _answer_interrupt()
        raise
    except Exception as raised:
        # Ctrl-C that DuckDB turned into an error: every command writes whole or not at all
        if interrupted(raised):
            _answer_interrupt()
        if isinstance(raised, HonestscaleError):
            exc: HonestscaleError | None = raised
        elif isinstance(raised, OSError):
            exc = from_os_error(raised)
        else:
            exc = as_store_error(raised)
        if exc is None:
            raise
        # masked: a password in a DuckLake store's address never reaches the terminal
        err.print(f"[red]error[/]: {escape(shown_text(masked(exc.message)))}", highlight=False)
        if exc.fix:
            err.print(f"  [bold]fix[/]: {escape(shown_text(masked(exc.fix)))}", highlight=False)
        sys.exit(exc.exit_code)
