"""`honestscale compare`: A against B, like with like, with the rules' verdicts; the CI gate; a setup's history."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from honestscale.cli import _output
from honestscale.cli._app import LintFormat, StoreOpt, WaitOpt, app, err, judged, out
from honestscale.errors import HonestscaleError


class MeasureOpt(StrEnum):
    time = "time"
    throughput = "throughput"
    energy = "energy"


@app.command()
def compare(
    a: Annotated[
        str | None,
        typer.Argument(
            help="Side A (the reference): a campaign, or filters such as "
            "campaign=x,system=iris,workers=8,software.nccl=2.21."
        ),
    ] = None,
    b: Annotated[
        str | None,
        typer.Argument(
            help="Side B (the change), written like A; MLPerf submissions "
            "(source=mlperf,model=resnet) compare with the state of the art."
        ),
    ] = None,
    store: StoreOpt = None,
    factor: Annotated[
        list[str] | None,
        typer.Option(
            help="The field under study, when the selectors do not "
            "name it (repeat for several); every other difference "
            "is a confound."
        ),
    ] = None,
    fail_if_slower: Annotated[
        str | None,
        typer.Option(
            metavar="PERCENT",
            help="Exit 1 when B is slower than A by more than this (5%), significantly and beyond the 95 % "
            "interval; exit 3 when it cannot judge (the measure missing on a side, too few runs, the tests "
            "disagree, the interval holds the threshold, different problems), never a pass.",
        ),
    ] = None,
    fail_if_faster: Annotated[
        str | None,
        typer.Option(
            metavar="PERCENT",
            help="Exit 1 when B is faster by more than this: an improvement too good to be true (exit 3: "
            "cannot judge, as for --fail-if-slower).",
        ),
    ] = None,
    measure: Annotated[MeasureOpt, typer.Option(help="What the gate judges.")] = MeasureOpt.time,
    history: Annotated[
        str | None,
        typer.Option(
            metavar="SETUP",
            help="Follow one setup (a selector: model=resnet50,workers=8) across campaigns in time instead.",
        ),
    ] = None,
    format: Annotated[
        LintFormat,
        typer.Option(
            "--format", "-f", help="text, json (schema honestscale.compare/1) or sarif (the findings)."
        ),
    ] = LintFormat.text,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Also write the comparison as a PDF report here (figures with every run of both sides).",
        ),
    ] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write it as HTML here.")] = None,
    config: Annotated[Path | None, typer.Option(help="honestscale.toml with lint suppressions.")] = None,
    wait: WaitOpt = 10.0,
) -> None:
    """Compare the runs A selects with those B selects: is the difference real, and is the comparison fair?

    The gate has three outcomes and exit codes: 0 pass (no significant difference, a change the other way, or one
    within the threshold), 1 fail (significant, and the 95 % interval beyond the threshold), 3 cannot judge (the
    measure missing on a side, too few runs, the tests disagree, the interval holds the threshold, A and B solve
    different problems); 2 is a usage error. A difference is decided by one rule: every piece of evidence printed
    beside it that decides (Mann-Whitney at 5 %, the interval of B / A, the sides' intervals when disjoint) must
    agree, else "the tests disagree".

    Setups are paired like with like (model, dataset, global batch, precision, workers); what differs within a
    pair is the factor under study (what the selectors or --factor name, or the one difference) and anything else
    a confound (HS214). Per pair: time to accuracy (or to train), throughput and energy, A's and B's median (rates:
    harmonic mean) with 95 % intervals, B / A with its bootstrap interval, the two-sided Mann-Whitney test, and the
    verdicts of every rule about the runs of both sides. Setups without a partner are listed with what differs.

    Examples: `honestscale compare nccl-2.18 nccl-2.21`;
    `honestscale compare campaign=ours,workers=8 source=mlperf,model=resnet`;
    `honestscale compare main pr-123 --fail-if-slower 5%` (exit 1 only on a significant slowdown beyond 5 %);
    `honestscale compare --history model=resnet50,workers=8`.
    """
    from honestscale import compare as comparing
    from honestscale.judged import load_config

    slower = None if fail_if_slower is None else comparing.parse_threshold(fail_if_slower, "--fail-if-slower")
    faster = None if fail_if_faster is None else comparing.parse_threshold(fail_if_faster, "--fail-if-faster")
    if history is None and (a is None or b is None):
        raise HonestscaleError("compare needs two sides, A and B (or --history SETUP)",
                               "honestscale compare CAMPAIGN_A CAMPAIGN_B, or see honestscale compare --help")  # fmt: skip
    extra = load_config(config)
    view = judged(store, wait=wait).view  # the rules run on each pair's own context (compare.in_context)
    if history is not None:
        series = comparing.history(view, history)
        if format is LintFormat.json:
            print(_output.dumps(comparing.history_json(history, series)))
        else:
            out.print(comparing.history_text(history, series))
        return
    assert a is not None and b is not None
    result = comparing.compare(view, a, b, factor=factor or (), suppressions=extra)
    gate = result.gate(slower, faster, measure.value)
    if format is LintFormat.json:
        print(_output.dumps(result.as_json(gate)))
    elif format is LintFormat.sarif:
        print(_output.dumps(result.as_sarif()))
    else:
        out.print(comparing.result_text(result, gate))
    if output is not None or html is not None:
        from honestscale.cli.report import compare_report

        written = compare_report(result, pdf=output, html=html, gate=gate)
        err.print(f"wrote {', '.join(str(p) for p in written)}", highlight=False)
    raise typer.Exit(comparing.exit_code(gate))
