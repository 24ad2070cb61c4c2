"""`honestscale claims`: the paper's claims, checked against the store (docs/claims.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from honestscale.cli import _output
from honestscale.cli._app import StoreOpt, WaitOpt, app, err, judged, out
from honestscale.errors import HonestscaleError

if TYPE_CHECKING:
    from honestscale.claims import ClaimRow, Verdict
    from honestscale.judged import View

claims_app = typer.Typer(
    help="The paper's claims, checked against the store: a claims file (TOML, docs/claims.md), one verdict each.",
    no_args_is_help=True,
)
app.add_typer(claims_app, name="claims")

FileArg = Annotated[
    Path,
    typer.Argument(help="The claims file (TOML: version = 1, then one claim table each: docs/claims.md)."),
]


class ClaimsFormat(StrEnum):
    text = "text"
    json = "json"
    latex = "latex"


def _verdicts(file: Path, store: Path | None, wait: float) -> list[Verdict]:
    from honestscale import claims

    parsed = claims.load(file)  # before the store: a malformed file is named at once
    return claims.check(judged(store, wait=wait).view, parsed)


@claims_app.command("check")
def check(
    file: FileArg,
    store: StoreOpt = None,
    format: Annotated[
        ClaimsFormat,
        typer.Option(
            "--format", "-f", help="text, json (schema honestscale.claims/1) or latex (a booktabs table)."
        ),
    ] = ClaimsFormat.text,
    wait: WaitOpt = 10.0,
    allow_drift: Annotated[
        bool,
        typer.Option("--allow-drift", help="Exit as the verdicts say though a locked claim's runs changed."),
    ] = False,
) -> None:
    """Give every claim of FILE one verdict, with the store's number beside it.

    supported: the store's number agrees (about V ± tolerance: within it, and V inside its 95 % interval;
    at_least / at_most: the whole interval on the claimed side; faster / slower: significant in that direction by
    compare's decision rule). contradicted: the interval and the claim do not overlap, the order is reversed, or
    there is no significant difference. not quotable: an error-severity rule fails on the runs behind the number
    (HS209's explained superlinear point, HS213's impossible times, an MFU over 100 %). cannot verify: what is
    missing is said (runs, an interval: how many more runs, the base case, a measure the runs did not record).

    Exit codes, as compare's gate: 0 every claim supported, 1 any contradicted or not quotable (1 outranks 3),
    3 otherwise any cannot verify; 2 a usage error (a malformed claims file: its line and the fix).
    A lock (`claims lock`) beside the file names every claim whose runs changed since, and makes the exit 1
    (the paper's numbers may have moved) unless --allow-drift.

    FILE may instead be a paper (.tex) that inputs the numbers.tex a report wrote: every \\hs{...} it uses is
    checked against the store as it is now (unchanged, changed since written, not quotable, gone, undefined;
    exit 0 only when every number is as written, else 1).

    Example: `honestscale claims check examples/claims/compare.toml --store s.duckdb`.
    """
    from honestscale import claims

    if file.suffix == ".tex":
        _check_paper(file, store, format, wait)
    verdicts = _verdicts(file, store, wait)
    if (locked := claims.read_lock(file)) is not None:
        claims.lock_changes(verdicts, locked[1], locked[0])
    code = claims.exit_code(verdicts, allow_drift=allow_drift)
    if format is ClaimsFormat.json:
        print(
            _output.dumps(
                {
                    "schema": claims.SCHEMA,
                    "file": str(file),
                    "exit_code": code,
                    "drifted": [v.claim.id for v in verdicts if v.changed],
                    "claims": [v.as_json() for v in verdicts],
                }
            )
        )
    elif format is ClaimsFormat.latex:
        print(claims.latex(verdicts), end="")
    else:
        out.print(claims.text(str(file), verdicts), highlight=False)
    drifted = [v.claim.id for v in verdicts if v.changed]
    if drifted and format is ClaimsFormat.text:
        what = "allowed (--allow-drift)" if allow_drift else "exit 1: check them, then claims lock again"
        said = f"{len(drifted)} claim(s) rest on runs that changed since the lock ({', '.join(drifted[:5])}): {what}"
        err.print(said, highlight=False, markup=False)
    raise typer.Exit(code)


def _check_paper(paper: Path, store: Path | None, format: ClaimsFormat, wait: float) -> None:
    """A paper's \\hs{...} numbers against the store: unchanged, changed, not quotable, gone or undefined."""
    from rich.markup import escape

    from honestscale import claims

    source, verdicts = claims.check_paper(judged(store, wait=wait).view, paper)
    code = claims.paper_exit_code(verdicts)
    if format is ClaimsFormat.json:
        print(
            _output.dumps(
                {
                    "schema": claims.SCHEMA,
                    "paper": str(paper),
                    "numbers": str(source),
                    "exit_code": code,
                    "macros": [v.as_json() for v in verdicts],
                }
            )
        )
    else:
        for v in verdicts:
            style = "green" if v.verdict == "unchanged" else "bold red"
            out.print(
                f"[{style}]{v.verdict}[/] \\hs{{{escape(v.key)}}} ({escape(str(paper))} line {v.line}): "
                f"{escape(v.reason)}",
                highlight=False,
            )
        out.print(
            f"{len(verdicts)} numbers used, from {escape(str(source))}; "
            f"{sum(v.verdict != 'unchanged' for v in verdicts)} not as written",
            highlight=False,
        )
    raise typer.Exit(code)


@claims_app.command("lock")
def lock(file: FileArg, store: StoreOpt = None, wait: WaitOpt = 10.0) -> None:
    """Record each claim's run set (ids and count) in FILE.lock.json, so that the next check names every claim
    whose runs changed as runs landed later. Commit the lock with the paper."""
    from honestscale import claims

    verdicts = _verdicts(file, store, wait)
    path = claims.write_lock(file, verdicts)
    err.print(f"locked the runs of {len(verdicts)} claims in {path}", highlight=False)


def appendix(view: View, target: Path, claims_file: Path | None, root: Path) -> None:
    """``report --appendix``: the artifact appendix of the claims of ``claims_file``, written to ``target``."""
    from honestscale import claims

    if claims_file is None:
        raise HonestscaleError(
            "--appendix writes the appendix of a paper's claims: give them",
            "add --claims claims.toml (docs/claims.md)",
        )
    parsed = claims.load(claims_file)
    verdicts = claims.check(view, parsed)
    for path in claims.write_appendix(view, parsed, verdicts, target, root):
        err.print(f"wrote {path}", highlight=False)


def judged_claims(file: Path, store: Path | None, wait: float) -> tuple[str, list[ClaimRow]]:
    """The claims of ``file`` judged on the whole store (a claim may be about other campaigns), as report rows."""
    from honestscale import claims

    parsed = claims.load(file)
    return file.name, claims.rows(claims.check(judged(store, wait=wait).view, parsed))
