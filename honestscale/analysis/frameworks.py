"""A framework comparison: the frameworks that ran the same setup, side by side; every other run left out, with why.

Like for like: the same model, dataset, global batch, precision, accelerator and nodes (``LIKE``); the setup
most frameworks ran is compared, and the runs of any other setup are named with what differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from honestscale.analysis import compare
from honestscale.analysis.points import Point, lint_codes, point
from honestscale.lint import Comparison


@dataclass
class FrameworkPoint:
    """One framework of a framework comparison (one worker count), over its repetitions."""

    framework: str
    versions: list[str]
    point: Point
    comm_measured: bool  # False: not exposed by the framework, or not recorded (point.comm says which)
    relative_time: float | None = None  # median time to train over the fastest framework's


def side_by_side(
    c: Comparison, fractions: dict[str, dict[str, Any]], findings: list[dict[str, Any]]
) -> tuple[list[FrameworkPoint], list[dict[str, str]]]:
    """The frameworks that ran the same model, dataset, global batch, precision and hardware, side by side;
    the runs of any other setup are left out, with what differs from the compared setup."""
    ref, setups = compare.setups(c.runs)
    left_out = []
    for key, runs in sorted(setups.items(), key=lambda kv: repr(kv[0])):
        if key == ref:
            continue
        diff = "; ".join(f"{compare.LIKE_NAMES.get(k, k)} {b} (compared: {a})"
                         for k, a, b in zip(compare.LIKE, ref, key, strict=True) if a != b)  # fmt: skip
        for fw in sorted({r.framework or "?" for r in runs}):
            left_out.append({"framework": fw, "runs": str(sum(1 for r in runs if (r.framework or "?") == fw)),
                             "differs": diff})  # fmt: skip
    if len({r.framework for r in setups[ref]}) < 2:
        return [], left_out + [{"framework": r, "runs": "", "differs": "no other framework ran this setup"}
                               for r in sorted({r.framework or "?" for r in setups[ref]})]  # fmt: skip
    out = []
    for name, runs in sorted(compare.framework_groups(c.runs).items()):
        p = point(runs[0].workers or 0, runs, fractions, mlperf=False)
        p.lint = lint_codes(findings, set(p.run_ids))
        out.append(FrameworkPoint(name, sorted({r.framework_version for r in runs if r.framework_version}), p,
                                  comm_measured=p.comm == "measured"))  # fmt: skip
    times = [f.point.time_s for f in out if f.point.time_s]
    for f in out:
        f.relative_time = f.point.time_s / min(times) if times and f.point.time_s else None
    return out, left_out
