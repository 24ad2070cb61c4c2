"""``honestscale serve``: the dashboard over the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honestscale.cli._app import StoreOpt, app
from honestscale.store import resolve_store_path


@app.command()
def serve(
    store: StoreOpt = None,
    watch: Annotated[
        Path | None,
        typer.Option(
            "--watch",
            help="Also land new and growing event files under this folder, as `ingest --watch` does (the "
            "campaigns page shows them arriving).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one, printed at start).")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="HONESTSCALE_TOKEN",
            help="Secret every request must carry (?token=... once in the browser, or 'Authorization: Bearer ...'); "
            "required off loopback.",
            show_default=False,
        ),
    ] = None,
    campaign: Annotated[
        str | None, typer.Option(help="With --watch: campaign for runs whose run_start names none.")
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --watch.")] = 2.0,
    config: Annotated[
        Path | None,
        typer.Option(
            help="honestscale.toml with lint suppressions \\[default: ./honestscale.toml if present]."
        ),
    ] = None,
) -> None:
    """A live dashboard and JSON API over the store: campaigns (landing as they run), each campaign's report
    (figures with hover values, tables, lint, downloads: PDF, CSV, LaTeX, SARIF, JSON), runs with their step-time
    breakdown along the run, and every lint finding. Read-only: no request writes to the store, and `ingest`,
    `report` and `lint` keep working beside it.

    Examples:

      honestscale serve                                  # http://127.0.0.1:8000/ on ./honestscale.duckdb

      honestscale serve --watch /scratch/$USER/runs      # and land runs as they are written

      HONESTSCALE_TOKEN=... honestscale serve --host 0.0.0.0 --port 8080   # shared with the centre
    """
    from honestscale import serve as dashboard
    from honestscale.lint import load_config

    dashboard.serve(resolve_store_path(store), host=host, port=port, token=token, watch=watch, campaign=campaign,
                    interval=interval, suppressions=load_config(config))  # fmt: skip
