"""``honestscale store ...``: moving a store between the tiers (a DuckDB file, a centre's DuckLake)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honestscale.cli._app import StoreOpt, app, out

store_app = typer.Typer(
    help="The store itself: copy it between a DuckDB file and a centre's DuckLake, check and clean a DuckLake's loose files (docs/store.md: the tiers).",
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


OlderThan = Annotated[
    float,
    typer.Option(
        "--older-than",
        help="Only files older than this many minutes (a writer still running is younger); 0: every file, when "
        "you know no ingest or campaign writes to the store now.",
        min=0,
    ),
]


def _loose(store: Path | None, older_than: float, remove: bool) -> None:
    from honestscale.store import is_lake, loose_files, open_store, resolve_store_path, shown

    address = str(store) if store else str(resolve_store_path(None))
    if not is_lake(address):
        out.print(
            f"{address}: a DuckDB file keeps its data inside itself: no loose files to check", highlight=False
        )
        return
    con = open_store(address, read_only=not remove)
    try:
        got = loose_files(con, older_than * 60, remove)
    finally:
        con.close()
    verb = "removed" if remove else "found"
    for what, paths in (("orphaned", got.orphaned), ("expired", got.expired)):
        for path in paths:
            out.print(f"{what}: {path}", highlight=False)
    age = f" older than {older_than:g} min" if older_than else ""
    out.print(
        f"{shown(address)}: {verb} {got.count} loose Parquet file(s){age}: {len(got.orphaned)} orphaned "
        f"(named by no catalog row: a writer killed mid-write), {len(got.expired)} expired (dropped by the "
        "catalog)",
        highlight=False,
    )
    if got.count and not remove:
        out.print(
            "remove them: honestscale store clean (the store's tables are not changed)", highlight=False
        )
        raise typer.Exit(1)


@store_app.command("check")
def check(store: StoreOpt = None, older_than: OlderThan = 60.0) -> None:
    """List the Parquet files of a centre's DuckLake that no catalog row names (a writer killed or cut off
    mid-write leaves them) or that the catalog dropped; exit 1 when there are any. Reads only."""
    _loose(store, older_than, remove=False)


@store_app.command("clean")
def clean(store: StoreOpt = None, older_than: OlderThan = 60.0) -> None:
    """Remove the loose Parquet files `store check` lists, with DuckLake's own cleanup functions; what the store
    shows is unchanged. Run it with --older-than 0 only when no writer is running."""
    _loose(store, older_than, remove=True)
