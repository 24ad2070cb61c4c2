"""Rules, findings, suppressions and verdicts: what a rule is and what it says (``_runner`` runs them)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from honestscale.analysis.points import FindingRecord
from honestscale.view import Comparison, Run, View

Said = tuple[
    str, str
]  # what a finding says and its fix: built by a rule's message functions, apart from its checks

SEVERITIES = ("error", "warning", "info")
# Which numbers a finding marks (``Finding.reach``): every number of the runs it names; the ratios of the series it is
# about (speedup, efficiency, their predictions), never one point's own number; or only the series' ratios of
# throughput, step time and per-worker rates (those compare different work per step where the batches differ).
REACHES = {
    "runs": "every number of the runs it names",
    "ratios": "the ratios of the series it is about (speedups, efficiencies, predictions), never one point's number",
    "rate_ratios": "the series' ratios of throughput, step time and per-worker rates only",
}
SECTIONS = ("What it checks", "Why it misleads", "Example", "Fix", "Reference")


@dataclass
class Finding:
    code: str
    severity: str
    outcome: str  # fail | cannot_verify
    target: str  # the comparison (or campaign) the finding is about
    runs: list[str]
    message: str
    evidence: dict[str, Any]
    fix: str
    suppressed: str | None = None  # the written justification, when suppressed
    reach: str = "runs"  # which numbers it marks (REACHES)

    def as_json(self) -> FindingRecord:
        return {
            "code": self.code,
            "severity": self.severity,
            "outcome": self.outcome,
            "runs": self.runs,
            "comparison": self.target,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "suppressed": {"reason": self.suppressed} if self.suppressed else None,
            "reach": self.reach,
        }


class Rule:
    """A rule: ``targets`` says what it looks at, ``check`` what is wrong with one target.

    Subclasses set ``code`` (HSnnn, never reused), ``name`` (the bad practice, kebab-case) and
    ``severity``; their docstring has the sections What it checks / Why it misleads / Example /
    Fix / Reference. ``check`` yields findings only for what fails or cannot be verified: a
    target without findings passes. ``reach`` says which numbers its findings mark (``REACHES``): a rule about
    a series marks the series' ratios, never the number of one point.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str]
    summary: ClassVar[str]
    # names it had before: still accepted, with a note naming the new one
    old_names: ClassVar[tuple[str, ...]] = ()
    reach: ClassVar[str] = "runs"  # the numbers its findings mark (REACHES) ...
    other_reaches: ClassVar[tuple[str, ...]] = ()  # ... and those some of its findings mark instead

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("config")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        raise NotImplementedError

    # helpers for subclasses
    def fail(
        self, target: Comparison, runs: Iterable[Run], message: str, fix: str, **evidence: Any
    ) -> Finding:
        ids = sorted(r.id for r in runs)
        return Finding(
            self.code, self.severity, "fail", target.id, ids, message, evidence, fix, reach=self.reach
        )

    def cannot_verify(self, target: Comparison, runs: Iterable[Run], missing: str, record: str,
                      **evidence: Any) -> Finding:  # fmt: skip
        return Finding(
            self.code, self.severity, "cannot_verify", target.id, sorted(r.id for r in runs),
            f"cannot verify: {missing}", evidence, record, reach=self.reach,
        )  # fmt: skip

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        return parse_sections(inspect.getdoc(cls) or "")


def parse_sections(doc: str) -> dict[str, str]:
    """The ``Section:`` blocks of a rule docstring."""
    out: dict[str, str] = {}
    current = None
    for line in doc.splitlines():
        m = re.match(r"^(What it checks|Why it misleads|Example|Fix|Reference):\s*(.*)$", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2)
        elif current is not None:
            out[current] = (out[current] + "\n" + line).strip("\n")
    return {k: v.strip() for k, v in out.items()}


@dataclass
class Suppression:
    code: str
    campaign: str
    reason: str
    source: str
    note: str | None = None  # the rule was named by a name it had before


@dataclass
class Verdict:
    code: str
    name: str
    severity: str
    passed: int = 0
    failed: int = 0
    cannot_verify: int = 0
    suppressed: int = 0

    @property
    def outcome(self) -> str:
        if self.failed:
            return "fail"
        if self.cannot_verify:
            return "cannot_verify"
        if self.suppressed:
            return "suppressed"
        return "pass" if self.passed else "not_applicable"


@dataclass
class LintResult:
    findings: list[Finding]
    verdicts: list[Verdict]
    comparisons: list[Comparison]
    suppressions: list[Suppression] = field(default_factory=list)
    notes: list[str] = field(
        default_factory=list
    )  # what the caller should change (a rule named by its old name)

    @property
    def errors(self) -> list[Finding]:
        return [
            f for f in self.findings if f.severity == "error" and f.outcome == "fail" and not f.suppressed
        ]
