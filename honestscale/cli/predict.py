"""The predict command: each scaling series' measures at larger worker counts, with the model and an interval."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from honestscale.cli import _output
from honestscale.cli._app import PoolOpt, ShowFormat, StoreOpt, WaitOpt, app, err, judged, out


@app.command()
def predict(
    store: StoreOpt = None,
    at: Annotated[
        list[int] | None,
        typer.Option(
            help="Worker count to predict at (repeat for more) \\[default: twice each series' largest]."
        ),
    ] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    format: Annotated[ShowFormat, typer.Option("--format", "-f")] = ShowFormat.text,
    extrap: Annotated[
        Path | None,
        typer.Option(
            help="Also write every series' values as Extra-P's JSON Lines input (extrap --json FILE)."
        ),
    ] = None,
    pool: PoolOpt = False,
    wait: WaitOpt = 10.0,
) -> None:
    """Each scaling series' time to train (or to accuracy), time per step, throughput and communication share
    predicted at other worker counts, from an empirical model chosen by leave-one-out cross-validation (Extra-P's
    PMNF terms, a power law, and Amdahl's or Gustafson's law where the series is what it describes), with a 95 %
    interval from a bootstrap over each worker count's runs, the model chosen again in every draw, and the model's
    own leave-one-out error.

    A prediction from fewer than 4 worker counts, or more than 2 times beyond the series, is marked "do not
    quote", with the reason. Series whose batch grows with the workers are modelled as their own recipe (said on
    each prediction); their time per step and throughput are refused. `benchmarks/scaling_models.py` checks the
    intervals against scales that were run later (docs/predict.md)."""
    if at and min(at) < 1:
        err.print(f"--at {min(at)}: a worker count is 1 or more")
        raise typer.Exit(2)
    from honestscale.analysis import forecast
    from honestscale.cli.analysis import _pooled

    got = _pooled(judged(store, campaign, wait=wait), pool).forecast(at)
    if extrap is not None:
        written = forecast.extrap_lines(got)
        extrap.write_text("\n".join(written) + ("\n" if written else ""))
        err.print(f"{len(written)} values of {len(got)} series written to {extrap} (extrap --json {extrap})")
    if format is ShowFormat.json:
        print(_output.dumps([asdict(s) for s in got]))
        return
    if not got:
        err.print(
            "no scaling series (runs of one setup at two or more worker counts)"
            + (f" in campaign {campaign}" if campaign else "")
        )
        return
    for line in forecast.lines(got):
        out.print(line, highlight=False, soft_wrap=True, markup=False)
