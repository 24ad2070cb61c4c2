"""``honestscale report``: the paper-ready scaling report of a selection (PDF, HTML, JSON), an overview of a store
of several campaigns, a paper's claims and its artifact appendix."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from honestscale.cli import _output
from honestscale.cli._app import ReportFormat, StoreOpt, WaitOpt, app, err, judged
from honestscale.errors import HonestscaleError, from_os_error
from honestscale.files import interrupt_answered

if TYPE_CHECKING:
    from honestscale.judged import Judged
    from honestscale.report import Check, Result


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


PathRootOpt = Annotated[
    Path | None,
    typer.Option(
        "--path-root",
        help="Show event files and the paths of command lines relative to this folder \\[default: the store's "
        "folder]; what is published never shows the home folder or a machine's absolute path.",
        show_default=False,
    ),
]


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
    from honestscale.cli.claims import appendix as write_appendix
    from honestscale.cli.claims import judged_claims
    from honestscale.judged import load_config, resolve_store_path

    if format is ReportFormat.pdf:  # before any work: a device, a FIFO or a link is never replaced
        reporting.check_targets(output, html, reporting.assets_for(output))

    j = judged(store, campaign, wait=wait, suppressions=load_config(config))
    if not j.view.runs and campaign is None:
        raise HonestscaleError(
            f"the store {resolve_store_path(store)} holds no runs: there is nothing to report",
            "ingest runs first (honestscale ingest PATH, or honestscale campaign run SPEC), or give --store",
        )
    root = reporting.path_root_of(store, path_root)
    if appendix is not None:
        write_appendix(j.view, appendix, claims, root)
        return
    if campaign is None and not all_campaigns and reporting.several_campaigns(j.view):
        _overview(j, output, html, format)
        return
    if format is ReportFormat.json:
        model, _ = reporting.analyse(j.view, campaign, path_root=root, result=j.lint)
        print(_output.dumps(model.as_json()))
        return
    said = judged_claims(claims, store, wait) if claims is not None else None
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


def compare_report(result: Result, pdf: Path | None, html: Path | None, gate: Sequence[Check]) -> list[Path]:
    """``compare -o/--html``: the comparison's report (PDF and HTML) of every pair, with the gate's checks."""
    from honestscale import report as reporting

    return reporting.compare_report(result, pdf=pdf, html=html, gate=gate)
