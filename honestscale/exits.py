"""The exit codes of every command: one table, which the CLI's help and docs/cli.md print (``markdown``).

A CI job acts on the code alone: 1 is a finding or a verdict to fix in the work, 2 a command or a file to fix, 3 a
judgement the data cannot make yet (what is missing is said), 75 (sysexits' EX_TEMPFAIL) a store that cannot be
used now: run the same command again later, nothing already written is lost.
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
CANNOT_JUDGE = 3
TEMPFAIL = 75
INTERRUPTED = 130

EXITS: tuple[tuple[int, str], ...] = (
    (OK, "as claimed: everything landed, every rule or claim holds, the gate passes"),
    (
        FAILED,
        "a finding or verdict that fails: an error-severity rule, a contradicted or unquotable claim, a gate",
    ),
    (USAGE, "usage: fix the command or the file it names (the message says which, and how)"),
    (
        CANNOT_JUDGE,
        "cannot judge: what is missing is said (lines quarantined, a file that did not land, too few runs)",
    ),
    (
        TEMPFAIL,
        "the store, its catalog or its disk is unavailable or full, or another process holds it past --wait: run "
        "the same command again later; what was written before stays",
    ),
    (INTERRUPTED, "interrupted (Ctrl-C): what had finished is kept, the rest rolled back"),
)


def meaning(code: int) -> str:
    """What an exit code says (``EXITS``)."""
    return dict(EXITS)[code]


def markdown() -> str:
    """The table, as the CLI's help epilog and docs/cli.md print it."""
    return "Exit codes (every command):\n\n" + "\n".join(f"* {code}: {text}" for code, text in EXITS)
