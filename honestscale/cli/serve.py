"""``honestscale serve``: the dashboard over the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honestscale.cli._app import StoreOpt, app, out
from honestscale.cli.report import PathRootOpt


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
        str,
        typer.Option(
            help="Address to listen on; anything but loopback needs a token (made and printed if not given)."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one, printed at start).")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="HONESTSCALE_TOKEN",
            help="Secret of at least 128 bits every request must carry (weaker ones are refused; off loopback or with "
            "--allow-host only one serve made: --make-token): a browser opens ?token=... once and keeps a session "
            "cookie, API clients send 'Authorization: Bearer ...'. Off loopback or with --allow-host, serve makes "
            "one if not given and prints its link.",
            show_default=False,
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="<name>",
            help="Another name the server answers for (repeatable; '*.example.org' for a domain): a proxy's name, "
            "when the proxy passes the browser's Host on (a token is then needed, as off loopback). Requests for "
            "any other name are refused (421), so a web page that makes its own name resolve to this machine (DNS "
            "rebinding) reads nothing.",
            show_default=False,
        ),
    ] = None,
    certfile: Annotated[
        Path | None,
        typer.Option(
            help="Serve HTTPS with this PEM certificate (chain); the session cookie is then Secure.",
            show_default=False,
        ),
    ] = None,
    keyfile: Annotated[
        Path | None,
        typer.Option(help="The certificate's private key (PEM), if not in --certfile.", show_default=False),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Addresses of TLS proxies whose X-Forwarded-Proto (https: a Secure cookie) and X-Forwarded-For "
            r"are believed, comma-separated \[default: 127.0.0.1,::1, or FORWARDED_ALLOW_IPS].",
            show_default=False,
        ),
    ] = None,
    campaign: Annotated[
        str | None, typer.Option(help="With --watch: campaign for runs whose run_start names none.")
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --watch.")] = 2.0,
    path_root: PathRootOpt = None,
    make_token: Annotated[
        bool,
        typer.Option(
            "--make-token",
            help="Print a new token (the only kind taken off loopback: 256 random bits and a checksum serve knows "
            "its own by) and exit; keep it in a file only you can read, give it as --token or HONESTSCALE_TOKEN.",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            help="honestscale.toml with lint suppressions \\[default: ./honestscale.toml if present]."
        ),
    ] = None,
    claims: Annotated[
        list[Path] | None,
        typer.Option(
            help="A paper's claims file (docs/claims.md; repeat for several): the Claims page shows each claim's "
            "verdict, judged again as runs land. Read at start; no path is ever taken from a browser.",
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

      honestscale serve --host 0.0.0.0 --certfile cert.pem --keyfile key.pem   # shared: prints a link with a new token

      honestscale serve --allow-host dash.example.org    # behind a TLS proxy on this machine that passes Host on
    """
    from honestscale import serve as dashboard
    from honestscale.judged import load_config, resolve_store_path

    if make_token:
        from honestscale.serve import make_token as made

        out.print(made(), highlight=False)
        return

    dashboard.serve(resolve_store_path(store), host=host, port=port, token=token, watch=watch, campaign=campaign,
                    interval=interval, suppressions=load_config(config), allow_hosts=allow_host or (),
                    certfile=certfile, keyfile=keyfile, forwarded_allow_ips=forwarded_allow_ips,
                    path_root=path_root, claims=claims or ())  # fmt: skip
