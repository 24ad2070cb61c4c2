"""The honest-metrics linter: rules HS101-HS112 (Hoefler 2018) and HS201- (Hoefler & Belli, SC15).

``lint(con)`` builds the read-only view of the store, groups runs into comparisons, applies every
rule and returns the findings and a verdict per rule. Rules live one per module in
``honestscale.lint.rules``.
"""

from __future__ import annotations

from collections.abc import Iterable

from honestscale.lint._config import load_suppressions
from honestscale.lint._engine import Finding, LintResult, Rule, Suppression, Verdict, registry
from honestscale.lint._engine import run as _run
from honestscale.lint._view import Comparison, Run, View, build
from honestscale.store import Connection


def lint(con: Connection, *, campaign: str | None = None, select: Iterable[str] | None = None,
         ignore: Iterable[str] | None = None, suppressions: Iterable[Suppression] = ()) -> LintResult:  # fmt: skip
    view = build(con, campaign)
    return _run(view, select=select, ignore=ignore, suppressions=[*suppressions, *load_suppressions(view)])


__all__ = [
    "Comparison",
    "Finding",
    "LintResult",
    "Rule",
    "Run",
    "Suppression",
    "Verdict",
    "View",
    "lint",
    "registry",
]
