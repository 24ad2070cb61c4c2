"""Commands that judge and present: summary, lint, report, advise."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from honestscale.cli import _output
from honestscale.cli._annotate import annotated
from honestscale.cli._app import (
    LintFormat,
    PoolOpt,
    ReportFormat,
    ShowFormat,
    StoreOpt,
    Tracker,
    WaitOpt,
    _store,
    app,
    err,
    judged,
    out,
)
from honestscale.errors import HonestscaleError, from_os_error
from honestscale.files import interrupt_answered
from honestscale.store import is_lake, resolve_store_path

if TYPE_CHECKING:
    from honestscale.judged import Judged
    from honestscale.report import ClaimRow
    from honestscale.view import View


@app.command()
def summary(
    store: StoreOpt = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    pool: PoolOpt = False,
    wait: WaitOpt = 10.0,
) -> None:
    """Per campaign, model and worker count: time to train and to accuracy (median of runs), throughput (harmonic
    mean of runs), step breakdown, accuracy; the same numbers as `report` and `advise` for the same runs.

    Each campaign is summarised on its own runs; `--pool` pools one setup's runs across campaigns and names them
    (JSON: `campaigns` of each row)."""
    from honestscale.cli import _output, _summary

    rows = _summary_rows(judged(store, campaign, wait=wait), pool)
    if format is ShowFormat.json:
        print(_output.dumps(_summary.summary_records(rows)))
    elif not rows:
        err.print("no final runs to summarise" + (f" in campaign {campaign}" if campaign else ""))
    else:
        out.print(_summary.summary_table(rows))


def _summary_rows(j: Judged, pool: bool = False) -> list[Any]:
    j = _pooled(j, pool)
    if j.view.superseded:  # kept, never mixed in, and never left out in silence
        err.print(
            f"{len(j.view.superseded)} run(s) of an earlier version of a campaign spec are superseded and left out "
            "(`honestscale runs` lists them with what changed)",
            highlight=False,
        )
    return j.summary()


def _pooled(j: Judged, pool: bool) -> Judged:
    """The judged model pooling its campaigns when asked, and saying which on stderr."""
    if not pool:
        return j
    pooled = j.pooling()
    if pooled.view.pooled:
        err.print(f"pooling {len(pooled.view.pooled)} campaigns as repetitions of one setup each: "
                  f"{', '.join(pooled.view.pooled)}", highlight=False)  # fmt: skip
    else:
        err.print("one campaign (or none): nothing to pool", highlight=False)
    return pooled


@app.command()
def advise(
    store: StoreOpt = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    pool: PoolOpt = False,
    wait: WaitOpt = 10.0,
) -> None:
    """Which setup to use and why, per campaign: fastest per sample and to the target, where the step time goes (data/I/O,
    compute, communication, optimizer, rank imbalance), projected efficiency at larger worker counts (Amdahl or
    Gustafson, 95 % bootstrap interval over repetitions), and what to try.

    Runs that fail HS101, HS106 or HS110 are excluded, and listed. Each campaign is advised on its own runs and
    named; `--pool` pools one setup's runs across campaigns and names them. `--format json` gives every number.
    """
    from honestscale import advise as _advise

    j = _pooled(judged(store, campaign, wait=wait), pool)
    advice = _advise.advise(j.view, j.lint, campaign)
    if format is ShowFormat.json:
        print(_output.dumps(advice.as_json()))
        return
    for line in _advise.lines(advice):
        out.print(line, highlight=False, soft_wrap=True, markup=False)


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
    from honestscale.lint import formats as _formats
    from honestscale.lint import load_config

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
    from honestscale.judged import read
    from honestscale.view import listed_runs

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
        annotated(annotate.value, listed, j.view.superseded, _formats.as_json(result), write)
    if format is LintFormat.json:
        print(_output.dumps(_formats.as_json(result)))
    elif format is LintFormat.sarif:
        print(_output.dumps(_formats.as_sarif(result)))
    else:
        out.print(_formats.as_text(result))
    raise typer.Exit(1 if result.errors else 0)


@contextlib.contextmanager
def _writing(output: Path) -> Iterator[None]:
    """A report being written: Ctrl-C and a full disk or a refused path say that the last report is whole."""
    from honestscale import report as reporting

    try:
        yield
    except KeyboardInterrupt:
        interrupt_answered()
        err.print(f"[red]interrupted[/]: nothing was written; the last complete report at {output} is whole")
        raise typer.Exit(130) from None
    except OSError as exc:
        said = from_os_error(exc)  # its kind keeps the exit code: a full disk is exits.TEMPFAIL, retry later
        raise type(said)(
            f"cannot write the report {output} or its figures and tables in {reporting.assets_for(output)}: "
            f"{exc.strerror or exc}",
            f"{said.fix}; a report written before is left whole",
        ) from None


def _overview(j: Judged, output: Path, html: Path | None, format: ReportFormat) -> None:
    from honestscale import report as reporting

    if format is ReportFormat.json:
        print(_output.dumps(reporting.overview(j.view, j.lint).as_json()))
        return
    with _writing(output):
        got, refused = reporting.report_overview(j.view, pdf=output, html=html, result=j.lint)
    err.print(f"wrote {output}: an overview of {len(got.campaigns)} campaigns ({got.runs} runs); "
              f"`--campaign NAME` writes one campaign's report, `--all` every campaign in full "
              f"(and {reporting.assets_for(output)}/campaigns.csv)", highlight=False)  # fmt: skip
    if html is not None:
        err.print(f"wrote {html}", highlight=False)
    if refused:
        err.print(f"[yellow]refused to fetch {len(refused)} URL(s) that are not the report's own assets[/]")


def _appendix(view: View, target: Path, claims_file: Path | None, root: Path) -> None:
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


def _judged_claims(file: Path, store: Path | None, wait: float) -> tuple[str, list[ClaimRow]]:
    """The claims of ``file`` judged on the whole store (a claim may be about other campaigns), as report rows."""
    from honestscale import claims

    parsed = claims.load(file)
    return file.name, claims.rows(claims.check(judged(store, wait=wait).view, parsed))


PathRootOpt = Annotated[
    Path | None,
    typer.Option(
        "--path-root",
        help="Show event files and the paths of command lines relative to this folder \\[default: the store's "
        "folder]; what is published never shows the home folder or a machine's absolute path.",
        show_default=False,
    ),
]


def path_root_of(store: str | Path | None, path_root: Path | None) -> Path:
    """The folder published paths are shown relative to: ``--path-root``, else the store's folder (a DuckLake
    store has none: the current folder)."""
    if path_root is None and is_lake(str(resolve_store_path(store))):
        return Path.cwd()
    return (path_root or resolve_store_path(store).parent).absolute()


@app.command()
def report(
    store: StoreOpt = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="The PDF to write.")] = Path("report.pdf"),
    html: Annotated[Path | None, typer.Option("--html", help="Also write the report as HTML here.")] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[
        ReportFormat, typer.Option("--format", "-f", help="pdf, or json: the analysis model.")
    ] = (ReportFormat.pdf),
    config: Annotated[Path | None, typer.Option(help="honestscale.toml with lint suppressions.")] = None,
    all_campaigns: Annotated[
        bool,
        typer.Option(
            "--all",
            help="On a store of several campaigns: every campaign's report in full, not the overview.",
        ),
    ] = False,
    path_root: PathRootOpt = None,
    appendix: Annotated[
        Path | None,
        typer.Option(
            help="Write the artifact appendix (SC AD/AE structure) for the claims of --claims to this path, as "
            "Markdown (.md) and LaTeX (.tex), instead of the report: each claim with its verdict, runs, hardware, "
            "software, datasets, commands, expected result and the cost to reproduce.",
        ),
    ] = None,
    claims: Annotated[
        Path | None,
        typer.Option(
            help="The paper's claims file (docs/claims.md): the report gains a section with each claim's verdict; "
            "with --appendix, the claims the appendix is written for."
        ),
    ] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """The paper-ready scaling report: PDF (and HTML), figures, tables, the lint verdicts.

    On a store of several campaigns, without --campaign: an overview (one line per campaign with its scaling
    headline and the rules about its runs, a table of the setups several campaigns ran, the verdicts per rule;
    <output>_files/campaigns.csv); --all writes every campaign in full instead, --campaign one of them.

    Per scaling series: medians with 95 % order-statistic intervals, speedup and efficiency against
    the base case (printed with its absolute time), Amdahl or Gustafson bounds, step breakdown,
    accuracy at every scale, the MLPerf score for MLPerf logs; every rule's verdict with the
    justification of suppressed ones; every run, tuning and failed ones included. The folder
    <output>_files/ holds the figures (PDF, SVG) and tables (CSV, LaTeX booktabs) for a paper.
    `--format json` prints the numbers behind every table and figure instead.

    What is published names no machine: event files are shown relative to the store's folder (or --path-root),
    command lines with `python` for the interpreter (the Python version beside them); the store keeps the full
    paths (`honestscale show RUN`).
    """
    from honestscale import report as reporting
    from honestscale.lint import load_config

    if format is ReportFormat.pdf:  # before any work: a device, a FIFO or a link is never replaced
        reporting.check_targets(output, html, reporting.assets_for(output))

    j = judged(store, campaign, wait=wait, suppressions=load_config(config))
    if not j.view.runs and campaign is None:
        raise HonestscaleError(
            f"the store {resolve_store_path(store)} holds no runs: there is nothing to report",
            "ingest runs first (honestscale ingest PATH, or honestscale campaign run SPEC), or give --store",
        )
    root = path_root_of(store, path_root)
    if appendix is not None:
        _appendix(j.view, appendix, claims, root)
        return
    if campaign is None and not all_campaigns and reporting.several_campaigns(j.view):
        _overview(j, output, html, format)
        return
    if format is ReportFormat.json:
        model, _ = reporting.analyse(j.view, campaign, path_root=root, result=j.lint)
        print(_output.dumps(model.as_json()))
        return
    said = _judged_claims(claims, store, wait) if claims is not None else None
    with _writing(output):
        outputs = reporting.report(
            j.view, pdf=output, html=html, campaign=campaign, path_root=root, claims=said, result=j.lint
        )
    err.print(
        f"wrote {output} (and {len(outputs.exports)} figure and table files in {outputs.assets})",
        highlight=False,
    )
    if html is not None:
        err.print(f"wrote {html}", highlight=False)
    if outputs.refused:
        err.print(
            f"[yellow]refused to fetch {len(outputs.refused)} URL(s) that are not the report's own assets[/]"
        )
