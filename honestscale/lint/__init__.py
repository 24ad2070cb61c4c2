"""The honest-metrics linter: rules HS101-HS112 (Hoefler 2018) and HS201- (Hoefler & Belli, SC15).

``lint(con)`` builds the read-only view of the store, groups runs into comparisons, applies every
rule and returns the findings and a verdict per rule. Rules live one per module in
``honestscale.lint.rules``.
"""

from __future__ import annotations

from collections.abc import Iterable

from honestscale.lint import _formats as formats
from honestscale.lint._config import load_file as load_config_file
from honestscale.lint._config import load_suppressions
from honestscale.lint._config import parse as parse_suppressions
from honestscale.lint._engine import Finding, LintResult, Rule, Suppression, Verdict, registry
from honestscale.lint._engine import run as run_rules
from honestscale.lint._view import (
    Comparison,
    Eval,
    PowerSample,
    Run,
    Steps,
    View,
    build,
    comparisons,
    med,
    power_samples,
)
from honestscale.store import Connection


def lint(con: Connection, *, campaign: str | None = None, select: Iterable[str] | None = None,
         ignore: Iterable[str] | None = None, suppressions: Iterable[Suppression] = (),
         view: View | None = None) -> LintResult:  # fmt: skip
    """Every rule over the store's view (or ``view``, already built from it), with the campaigns' suppressions."""
    view = view if view is not None else build(con, campaign)
    return run_rules(
        view, select=select, ignore=ignore, suppressions=[*suppressions, *load_suppressions(view)]
    )


__all__ = [
    "Comparison",
    "Eval",
    "Finding",
    "LintResult",
    "PowerSample",
    "Rule",
    "Run",
    "Steps",
    "Suppression",
    "Verdict",
    "View",
    "build",
    "comparisons",
    "formats",
    "lint",
    "load_config_file",
    "load_suppressions",
    "med",
    "parse_suppressions",
    "power_samples",
    "registry",
    "run_rules",
]
