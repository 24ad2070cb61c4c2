"""Commands that judge: summary (the numbers of every setup) and advise (which setup, and why)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from honestscale.cli import _output
from honestscale.cli._app import (
    PoolOpt,
    ShowFormat,
    StoreOpt,
    WaitOpt,
    app,
    err,
    judged,
    out,
)

if TYPE_CHECKING:
    from honestscale.judged import Judged


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
    advised(_pooled(judged(store, campaign, wait=wait), pool), campaign, as_json=format is ShowFormat.json)


def advised(j: Judged, campaign: str | None, *, as_json: bool = False) -> None:
    """The advice on the judged selection, printed (``advise``, and ``probe``'s verdict)."""
    from honestscale import advise as _advise

    advice = _advise.advise(j.view, j.lint, campaign)
    if as_json:
        print(_output.dumps(advice.as_json()))
        return
    for line in _advise.lines(advice):
        out.print(line, highlight=False, soft_wrap=True, markup=False)
