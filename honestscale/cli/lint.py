"""``honestscale lint``: the rules' verdicts on the runs and comparisons of a selection (text, JSON, SARIF), a
rule explained, the rules' pages, and a tracker's runs tagged with their verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from honestscale.cli import _output
from honestscale.cli._annotate import annotated
from honestscale.cli._app import LintFormat, StoreOpt, Tracker, WaitOpt, _store, app, err, judged, out
from honestscale.errors import HonestscaleError


@app.command()
def lint(
    store: StoreOpt = None,
    format: Annotated[LintFormat, typer.Option("--format", "-f", help="text, json or sarif (2.1.0).")] = (
        LintFormat.text
    ),
    select: Annotated[
        list[str] | None,
        typer.Option(help="Only these rules: a code (HS101), a prefix (HS1) or a name (io-not-considered)."),
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option(help="Skip these rules for this call (no justification kept).")
    ] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="honestscale.toml with \\[tool.honestscale.lint] suppressions \\[default: ./honestscale.toml if present]."
        ),
    ] = None,
    explain: Annotated[
        str | None, typer.Option("--explain", help="Print what a rule checks, why, and the fix.")
    ] = None,
    rules_doc: Annotated[
        bool, typer.Option("--rules-doc", help="Print the rules page (docs/rules.md).")
    ] = False,
    quoting_doc: Annotated[
        bool, typer.Option("--quoting-doc", help="Print the rules that can make a number 'do not quote'.")
    ] = False,
    annotate: Annotated[
        Tracker | None,
        typer.Option(
            help="Show the verdict tags each run read from this tracker would get in the store it came from "
            "(honestscale.verdict, .failed, .cannot_verify, .quote); nothing is written without --write."
        ),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="With --annotate: set the tags that differ (never a metric).")
    ] = False,
    wait: WaitOpt = 10.0,
) -> None:
    """Check runs and comparisons against the twelve ways to fool the masses and the SC15 rules.

    Runs are grouped into comparisons (repetitions of a configuration, scaling series, framework and
    hardware comparisons, campaigns); every rule reports, per comparison, fail or cannot verify (with what
    to record) and the evidence. Suppress a rule for a campaign only with a reason, in the campaign spec
    or a honestscale.toml: \\[tool.honestscale.lint] ignore = \\[{ code = "HS106", reason = "..." }].

    Exit code 1 when an error-severity rule fails, 0 otherwise.
    """
    from honestscale.judged import listed_runs, load_config, read
    from honestscale.lint import formats as _formats

    if explain:
        try:
            print(_formats.explain(explain), end="")
        except KeyError:
            raise HonestscaleError(
                f"{explain!r} names several rules", "give one code or name (honestscale lint --rules-doc)"
            ) from None
        return
    if rules_doc:
        print(_formats.rules_markdown(), end="")
        return
    if quoting_doc:
        print(_formats.quoting_markdown(), end="")
        return
    extra = load_config(config)

    if write and annotate is None:
        raise HonestscaleError("--write writes the tags --annotate plans", "add --annotate mlflow")
    if annotate is not None and (select or ignore):
        raise HonestscaleError(
            "--annotate writes the verdicts of every rule: a run some rules were left out of would read as passing",
            "drop --select and --ignore (suppress a rule with its reason in honestscale.toml instead)",
        )
    if annotate is not None:  # the tracker's runs as the store lists them, read with the view
        with _store(store, read_only=True, wait=wait) as con:
            j, listed = read(con, campaign, suppressions=extra), listed_runs(con, campaign)
    else:
        j, listed = judged(store, campaign, wait=wait, suppressions=extra), []
    result = j.lint_of(select, ignore)
    for note in result.notes:
        err.print(f"[yellow]note[/]: {escape(note)}", highlight=False)
    if annotate is not None:
        annotated(annotate.value, listed, j.view.superseded, j.findings, write)
    if format is LintFormat.json:
        print(_output.dumps(_formats.as_json(result)))
    elif format is LintFormat.sarif:
        print(_output.dumps(_formats.as_sarif(result)))
    else:
        out.print(_formats.as_text(result))
    raise typer.Exit(1 if result.errors else 0)
