"""``honestscale store ...``: moving a store between the tiers (a DuckDB file, a centre's DuckLake)."""

from __future__ import annotations

from typing import Annotated

import typer

from honestscale.cli._app import app, out

store_app = typer.Typer(
    help="The store itself: copy it between a DuckDB file and a centre's DuckLake (README: the tiers).",
    no_args_is_help=True,
)
app.add_typer(store_app, name="store")


@store_app.command("copy")
def copy(
    source: Annotated[
        str, typer.Argument(help="The store to copy: a .duckdb file or a ducklake:postgres:... address.")
    ],
    target: Annotated[
        str,
        typer.Argument(
            help="A new store (a new file; a DuckLake catalog database with no store yet, its data folder given "
            "by --data-path before the command name)."
        ),
    ],
) -> None:
    """Copy every table of SOURCE into a new store TARGET, in one transaction, and check each table row for row.

    Both at this version's schema (migrate the source first). Moving up, a file into the centre's DuckLake:

      honestscale --data-path /shared/hs-data store copy honestscale.duckdb 'ducklake:postgres:dbname=hs host=db user=hs'

    and back, for a laptop: honestscale store copy 'ducklake:postgres:...' mine.duckdb
    """
    from honestscale.store import copy_store, shown

    copied = copy_store(source, target)
    for c in copied:
        out.print(f"{c.table}: {c.rows:,} rows", highlight=False)
    out.print(f"copied {len(copied)} tables from {shown(source)} into {shown(target)}; each checked row for row",
              highlight=False)  # fmt: skip
