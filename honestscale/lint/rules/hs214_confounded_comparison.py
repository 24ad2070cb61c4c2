from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def _text(d: dict[str, Any]) -> str:
    return f"{d['name']} {', '.join(d['a'])} → {', '.join(d['b'])}"


def confounded(
    factor: list[dict[str, Any]], confounds: list[dict[str, Any]], follows: list[dict[str, Any]]
) -> Said:
    """What differs besides the factor (or with none named), and what follows from the factor."""
    what = "; ".join(_text(d) for d in confounds)
    if factor:
        studied = ", ".join(d["name"] for d in factor)
        message = f"besides the factor under study ({studied}), {len(confounds)} more thing(s) differ: {what}"
    else:
        message = f"{len(confounds)} things differ and none is named the factor: {what}"
    if follows:
        message += "; following from the factor, not confounds: " + "; ".join(
            f"{_text(d)} ({d['why']})" for d in follows
        )
    return (
        message,
        "rerun one side with only the factor changed, or name the factor with --factor and report the rest",
    )


class ConfoundedComparison(Rule):
    """Two setups compared (``honestscale compare A B``) differ in one thing only: the factor under study.

    What it checks: each pair of like-for-like setups of a comparison of A and B (same model, dataset, global batch,
    precision and workers) differs only in the factor under study: what the selectors (or ``--factor``) name, or
    the one field that differs. A difference that follows from a factor that changes the worker count is a
    consequence, not a confound, and is named with why: the per-worker batch when the global batch is split between
    the workers (strong scaling), the threads per worker when the launcher splits a node's threads between its
    workers, the collective backend that a single worker does without, the nodes the workers fill at a fixed number
    per node. Every other recorded difference (framework version, accelerator, nodes, software versions,
    optimizer, schedule, compression, any hyper-parameter the runner recorded) is a confound; where two or more
    things differ and none is named the factor, each confounds the others. Comparisons against MLPerf submissions
    are judged by HS112 and HS104 instead.
    Why it misleads: a change credited to the factor may come from the confound (NCCL 2.21 "is 12 % faster" measured
    on a newer driver too), and a confound can as well hide a real effect of the factor.
    Example: ``compare loaders=0 loaders=1`` where the second campaign also switched the learning-rate schedule to
    cosine: its time to accuracy moves with the schedule as much as with the data loaders.
    Fix: rerun one side with everything but the factor as the other side had it, or name the difference the study
    is about with ``--factor`` and report the other as part of the comparison.
    Reference: Hoefler & Belli, SC15, rule 9 (document all varying factors and their levels) and rule 7 (compare
    what the data supports); Montgomery, Design and Analysis of Experiments, ch. 1 (confounding).
    """

    code = "HS214"
    name = "confounded-comparison"
    severity = "warning"
    summary = "a compared pair differs only in the factor under study"

    def targets(self, view: View) -> list[Comparison]:
        return [c for c in view.of_kind("pair") if not c.key.get("state_of_the_art")]

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        confounds = target.key.get("confounds") or []
        if not confounds:
            return
        factor = target.key.get("factor") or []
        follows = target.key.get("consequences") or []
        yield self.fail(
            target,
            target.runs,
            *confounded(factor, confounds, follows),
            factor=[d["field"] for d in factor],
            confounds=[d["field"] for d in confounds],
            consequences=[d["field"] for d in follows],
        )
