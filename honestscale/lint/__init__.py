"""The honest-metrics linter: rules HS101-HS112 (Hoefler 2018) and HS201- (Hoefler & Belli, SC15).

``lint(view)`` applies every rule to the comparisons of the one read model (``honestscale.view``) and
returns the findings and a verdict per rule. Rules live one per module in
``honestscale.lint.rules``.
"""

from __future__ import annotations

from collections.abc import Iterable

from honestscale.lint import _formats as formats
from honestscale.lint._config import load_default as load_config
from honestscale.lint._config import load_file as load_config_file
from honestscale.lint._config import load_suppressions
from honestscale.lint._config import parse as parse_suppressions
from honestscale.lint._engine import Finding, LintResult, Rule, Suppression, Verdict
from honestscale.lint._runner import registry
from honestscale.lint._runner import run as run_rules
from honestscale.view import View


def lint(view: View, *, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
         suppressions: Iterable[Suppression] = ()) -> LintResult:  # fmt: skip
    """Every rule over the view, with the given suppressions and the campaigns' own."""
    return run_rules(
        view, select=select, ignore=ignore, suppressions=[*suppressions, *load_suppressions(view)]
    )


__all__ = [
    "Finding",
    "LintResult",
    "Rule",
    "Suppression",
    "Verdict",
    "formats",
    "lint",
    "load_config",
    "load_config_file",
    "load_suppressions",
    "parse_suppressions",
    "registry",
    "run_rules",
]
