"""The paper's own claims, checked against the store (``honestscale claims``).

A claims file (``_file``, TOML, ``docs/claims.md``) states what a paper says: the sentence, the measure, the runs
it is about (``compare``'s selectors), the point, the statistic quoted and the value with its relation. Each claim
gets one verdict (``_judge``): supported, contradicted, not quotable (an error-severity rule fails on the runs behind
the number) or cannot verify (what is missing is said), with the store's number beside it (``_numbers``: the
report's own numbers, or ``compare``'s decision for an ordering of two run sets). ``_lock`` records each claim's run
set so that a verdict cannot drift silently as runs land; ``_paper`` checks the ``\\hs{...}`` numbers a paper
uses (from the ``numbers.tex`` a report wrote) against the store as it is now.
"""

from __future__ import annotations

from honestscale.claims._appendix import write as write_appendix
from honestscale.claims._file import MEASURES, RELATIONS, VERSION, Claim, ClaimsError, ClaimsFile, load
from honestscale.claims._judge import (
    CANNOT_VERIFY,
    CONTRADICTED,
    NOT_QUOTABLE,
    SUPPORTED,
    VERDICTS,
    Verdict,
    check,
    exit_code,
    judge,
)
from honestscale.claims._lock import changes as lock_changes
from honestscale.claims._lock import read as read_lock
from honestscale.claims._lock import write as write_lock
from honestscale.claims._paper import MacroVerdict, check_paper
from honestscale.claims._paper import exit_code as paper_exit_code
from honestscale.claims._text import latex, rows, text
from honestscale.report import ClaimRow  # what a report's claims section is made of

SCHEMA = "honestscale.claims/1"

__all__ = [
    "CANNOT_VERIFY",
    "CONTRADICTED",
    "MEASURES",
    "NOT_QUOTABLE",
    "RELATIONS",
    "SCHEMA",
    "SUPPORTED",
    "VERDICTS",
    "VERSION",
    "Claim",
    "ClaimRow",
    "ClaimsError",
    "ClaimsFile",
    "MacroVerdict",
    "Verdict",
    "check",
    "check_paper",
    "exit_code",
    "judge",
    "latex",
    "load",
    "lock_changes",
    "paper_exit_code",
    "read_lock",
    "rows",
    "text",
    "write_appendix",
    "write_lock",
]
