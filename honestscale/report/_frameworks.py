"""A framework comparison: the frameworks that ran the same setup, side by side; every other run left out, with why.

Like for like is the view's (``honestscale.view.LIKE``): the same model, dataset, global batch, precision,
accelerator model and nodes; the setup most frameworks ran is compared, the runs of any other setup are named with
what differs (``Comparison.left_out``).
"""

from __future__ import annotations

from dataclasses import dataclass

from honestscale.analysis import compare
from honestscale.analysis.points import FindingRecord, Point, lint_codes, point
from honestscale.view import Comparison, StepFractions


@dataclass
class FrameworkPoint:
    """One framework of a framework comparison (one worker count), over its repetitions."""

    framework: str
    versions: list[str]
    point: Point
    comm_measured: bool  # False: not exposed by the framework, or not recorded (point.comm says which)
    relative_time: float | None = None  # median time to train over the fastest framework's


def side_by_side(
    c: Comparison, fractions: dict[str, StepFractions], findings: list[FindingRecord]
) -> list[FrameworkPoint]:
    """The frameworks of the comparison's like-for-like runs (the view's: same model, dataset, global batch,
    precision, accelerator model and nodes), side by side; the runs left out are ``c.left_out``."""
    out = []
    for name, runs in sorted(compare.framework_groups(c.runs).items()):
        p = point(runs[0].workers or 0, runs, fractions, mlperf=False)
        p.lint = lint_codes(findings, set(p.run_ids), "point")
        out.append(FrameworkPoint(name, sorted({r.framework_version for r in runs if r.framework_version}), p,
                                  comm_measured=p.comm == "measured"))  # fmt: skip
    times = [f.point.time_s for f in out if f.point.time_s]
    for f in out:
        f.relative_time = f.point.time_s / min(times) if times and f.point.time_s else None
    return out
