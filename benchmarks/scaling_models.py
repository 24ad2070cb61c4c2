"""honestscale's scaling models against Extra-P's on the same MLPerf series, predicting scales held back.

The series: tests/data/mlperf-v2.0-scaling (MLPerf Training v2.0, one submitter, benchmark and system family at four
to six scales each; scripts/mlperf-scaling-series). Each successful run's time to train is mlperf-logging's (run_stop minus
run_start, its result summarizer's query), read from a copy of the file (its compute_score would delete a
scaling.json beside it). For each series and h = 1, 2, both fit all but the largest h scales (at least 3 left) and
predict each held-back one; the measured value is the median of its runs, as is what both fit:

  * honestscale: ``analysis.prediction.predict`` (its model chosen by leave-one-out cross-validation, its 95 %
    interval);
  * Extra-P 4.2.5 (``extrap --json``, ``--measure median``) on honestscale's JSON Lines export of the same runs, by
    default and with its negative exponents (``allow_negative_exponents=True``, for strong scaling). Extra-P runs
    in its own environment (it pins numpy below 2 and brings PySide6), ``.venv-extrap``, which the first run makes
    (``python3 -m venv .venv-extrap && .venv-extrap/bin/pip install extrap==4.2.5``), or ``--extrap PATH``.

Printed: every prediction beside the measured value, then each one's mean absolute relative error and the share of
held-back scales inside honestscale's 95 % intervals (all, and those it marks quotable).

    python benchmarks/scaling_models.py [--extrap .venv-extrap/bin/extrap] [--draws 400] [--record]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402
from honestscale import extrap  # noqa: E402
from honestscale.analysis import prediction  # noqa: E402
from tests.mlperf import scaling_series  # noqa: E402

DATA = HERE.parent / "tests" / "data" / "mlperf-v2.0-scaling"
TIME = prediction.Measure("time", "time to train", "s", "median of runs", (0.0, math.inf), ())


def _install(tool: Path) -> None:
    """Extra-P in its own environment (it pins numpy below 2 and brings PySide6, which the main one must not
    take), made where the default path has none: a few minutes, once."""
    venv = tool.parents[1]
    if tool != HERE.parent / ".venv-extrap" / "bin" / "extrap":
        sys.exit(f"no Extra-P at {tool}: give the extrap of an environment that has extrap==4.2.5")
    print(f"installing Extra-P 4.2.5 into {venv} (its own environment; once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "extrap==4.2.5"], check=True)


def extrap_models(tool: str, fits: dict[str, dict[int, list[float]]], negative: bool) -> dict[str, str]:
    """Extra-P's model of each series (its Python expression in p), from honestscale's JSON Lines export: one file
    and one call per series (Extra-P takes one set of scales per experiment)."""
    got = {}
    options = ["--options", "allow_negative_exponents=True"] if negative else []
    with tempfile.TemporaryDirectory() as tmp:
        for name, fit in fits.items():
            path = Path(tmp) / "series.jsonl"
            path.write_text("\n".join(extrap.lines([(name, "time", fit)])) + "\n")
            command = [tool, "--json", str(path), "--measure", "median", *options, "--disable-progress"]
            done = subprocess.run(
                [*command, "--print", "{callpath};{model:python}"], capture_output=True, text=True, check=True
            )
            got[name] = done.stdout.strip().rpartition(";")[2]
    return got


@dataclass(frozen=True)
class Held:
    """One scale held back: what was measured there, and what each predicted from the scales below it."""

    series: str
    held: int
    at: int
    measured: float  # the median of its runs
    ours: float
    low: float
    high: float
    quote: bool
    extrap: float
    extrap_negative: float

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


def _error(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1)


def evaluate(model: str, p: int) -> float:
    return float(
        eval(model, {"__builtins__": {}, "log2": math.log2, "p": p})
    )  # Extra-P's own output: its model as a Python expression in p


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--extrap", default=str(HERE.parent / ".venv-extrap" / "bin" / "extrap"))
    parser.add_argument("--draws", type=int, default=prediction.DRAWS)
    parser.add_argument(
        "--record", action="store_true", help="append the figures to benchmarks/results.jsonl"
    )
    args = parser.parse_args()
    if not Path(args.extrap).exists():
        _install(Path(args.extrap))
    session = Session("scaling_models")
    times = scaling_series(DATA)
    rows: list[Held] = []
    for h in (1, 2):
        fits = {n: {w: s[w] for w in sorted(s)[:-h]} for n, s in times.items() if len(s) - h >= 3}
        default, negative = extrap_models(args.extrap, fits, False), extrap_models(args.extrap, fits, True)
        for name, fit in fits.items():
            for w in sorted(times[name])[-h:]:
                ours = prediction.predict(TIME, fit, w, draws=args.draws)
                assert ours.value is not None and ours.low is not None and ours.high is not None, ours.refused
                measured = statistics.median(times[name][w])
                rows.append(Held(name, h, w, measured, ours.value, ours.low, ours.high, ours.quote,
                                 evaluate(default[name], w), evaluate(negative[name], w)))  # fmt: skip
    print(f"{'series':17s} {'held':>4s} {'at':>5s} {'measured':>9s} {'honestscale [95 % interval]':>32s} "
          f"{'in':>3s} {'quote':>5s} {'Extra-P':>9s} {'Extra-P neg':>11s}")  # fmt: skip
    for r in rows:
        print(f"{r.series:17s} {r.held:4d} {r.at:5d} {r.measured:9.1f} {r.ours:9.1f} [{r.low:8.1f}, {r.high:8.1f}]  "
              f"{'yes' if r.inside else 'NO':>3s} {'yes' if r.quote else 'no':>5s} {r.extrap:9.1f} "
              f"{r.extrap_negative:11.1f}")  # fmt: skip
    our_error = statistics.mean(_error(r.ours, r.measured) for r in rows)
    theirs = statistics.mean(_error(r.extrap, r.measured) for r in rows)
    negative_ = statistics.mean(_error(r.extrap_negative, r.measured) for r in rows)
    covered = sum(r.inside for r in rows)
    quotable = [r for r in rows if r.quote]
    n = len(rows)
    print(f"\n{n} held-back scales of {len(times)} series; mean absolute relative error: honestscale "
          f"{100 * our_error:.1f} %, Extra-P {100 * theirs:.1f} %, Extra-P with negative exponents {100 * negative_:.1f} %; "
          f"inside honestscale's 95 % intervals: {covered} of {n} ({sum(r.inside for r in quotable)} of "
          f"{len(quotable)} quotable)")  # fmt: skip
    goal = f"the goal: Extra-P's on the same fits, with negative exponents ({theirs:.3f} by default)"
    figures = [
        Figure("scaling_models", f"mean abs. relative error, {n} held-back MLPerf scales", our_error, "", 0.0,
               "lower", f"<= {negative_:.3f}", goal),
        Figure("scaling_models", f"share of {n} held-back scales inside the 95 % intervals", covered / n, "", 0.0,
               "higher", ">= 0.9", f"{sum(r.inside for r in quotable)} of {len(quotable)} quotable"),
    ]  # fmt: skip
    session.finish(figures, args.record)


if __name__ == "__main__":
    main()
