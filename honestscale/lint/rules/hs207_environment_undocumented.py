from __future__ import annotations

from collections.abc import Iterator

from honestscale import catalogue
from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View


def _missing(run: Run) -> list[str]:
    """The fields ``run`` leaves unrecorded: absent, empty or a placeholder ("TODO", "unknown")."""

    def empty(field: str) -> bool:
        return not run.value(field) or catalogue.placeholder(run.value(field))

    missing = []
    if empty("framework"):
        missing.append("framework")
    elif empty("framework_version") and not any(ch.isdigit() for ch in str(run.value("framework"))):
        missing.append("framework_version")
    if not run.value("n_nodes"):
        missing.append("nodes")
    if (run.value("accelerators_per_node") or 0) > 0 and empty("accelerator"):
        missing.append("accelerator")
    if empty("cpu"):
        missing.append("cpu")
    if not any(not catalogue.placeholder(v) for v in run.software_stack.values()):
        missing.append("software")
    if (run.value("n_nodes") or 1) > 1 and empty("interconnect"):
        missing.append("interconnect")
    return missing


def undocumented(fields: list[str]) -> Said:
    return (
        f"environment not documented: {', '.join(fields)} missing",
        f"record {', '.join(fields)} in run_start (or the system description)",
    )


class EnvironmentUndocumented(Rule):
    """Hardware and software must be documented well enough to reproduce the runs.

    What it checks: every run records its framework and version, node count, CPU model, software
    stack (CUDA, cuDNN, NCCL, driver or the CPU equivalents), the accelerator model when it used
    accelerators, and the interconnect when it spanned nodes. Placeholders such as "TODO" count as
    missing.
    Why it misleads: without the environment the result cannot be reproduced or compared, and
    differences caused by a driver or a network are attributed to the method (Hoefler & Belli, SC15,
    rule 9 on documenting the setup).
    Example: a system description whose CPU is "CPUName" and whose network is "TODO".
    Fix: let the runners capture the environment (honestscale does), and complete MLPerf-style system
    descriptions.
    Reference: Hoefler & Belli, SC15, rule 9.
    """

    code = "HS207"
    name = "environment-undocumented"
    severity = "warning"
    summary = "framework, hardware, software stack and interconnect are recorded"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        gaps = {r.id: _missing(r) for r in target.runs}
        bad = [r for r in target.runs if gaps[r.id]]
        if bad:
            fields = sorted({f for r in bad for f in gaps[r.id]})
            yield self.fail(
                target,
                bad,
                *undocumented(fields),
                missing=fields,
            )
