"""The verdicts as a terminal reads them, and as a table for the paper (LaTeX booktabs)."""

from __future__ import annotations

from collections import Counter

from honestscale.claims._judge import CANNOT_VERIFY, CONTRADICTED, NOT_QUOTABLE, SUPPORTED, VERDICTS, Verdict
from honestscale.display import shown, shown_text
from honestscale.report import ClaimRow, latex_escape

MARK = {SUPPORTED: "✓", CONTRADICTED: "✗", NOT_QUOTABLE: "!", CANNOT_VERIFY: "?"}
STYLE = {SUPPORTED: "green", CONTRADICTED: "red", NOT_QUOTABLE: "bold red", CANNOT_VERIFY: "yellow"}


def text(path: str, verdicts: list[Verdict]) -> str:
    """One block per claim (verdict, id, line, the sentence, why, the evidence), then the count of each verdict.
    Rich markup: the caller prints it through a console, every user-given text escaped."""
    from rich.markup import escape

    lines = []
    for v in verdicts:
        c = v.claim
        lines.append(
            f"[{STYLE[v.verdict]}]{MARK[v.verdict]} {v.verdict}[/]  [bold]{escape(shown(c.id))}[/] "
            f"({escape(shown(path))} line {c.line})"
        )
        lines.append(f"  “{escape(shown(c.says))}”")  # a control or bidi character shown as its escape
        lines.append(f"  {escape(shown_text(v.reason))}")
        lines += [f"    {escape(shown_text(e))}" for e in v.evidence]
        if v.changed:
            lines.append(f"    [yellow]{escape(v.changed)}[/]")
        lines.append("")
    counts = Counter(v.verdict for v in verdicts)
    lines.append(
        ", ".join(f"{counts[k]} {k}" for k in VERDICTS if counts[k]) + f" (of {len(verdicts)} claims)"
    )
    return "\n".join(lines)


def _short(statistic: str) -> str:
    """The statistic in a word or two, for a table cell: which one the number is."""
    for key, word in (
        ("olympic", "MLPerf olympic mean"),
        ("MLPerf", "MLPerf score"),
        ("harmonic", "harmonic mean"),
        ("median", "median"),
    ):
        if key in statistic:
            return ("ratio of " + word + "s") if "ratio" in statistic else word
    return statistic


def latex(verdicts: list[Verdict]) -> str:
    """A booktabs table: each claim's sentence, the store's number with its interval and n, and the verdict."""
    from honestscale.analysis.points import sig

    rows = []
    for v in verdicts:
        n = v.number
        number = (
            "--"
            if n is None
            else n.shown
            + (f" [{sig(n.low)}, {sig(n.high)}]" if n.has_interval else "")
            + f" (n = {n.n}; {_short(n.statistic)})"
        )
        rows.append(
            f"{latex_escape(shown(v.claim.says))} & {latex_escape(number)} & {latex_escape(v.verdict)} \\\\"
        )
    return "\n".join(
        [
            r"\begin{tabular}{p{0.5\linewidth}ll}",
            r"\toprule",
            r"Claim & The store (95 \% interval; statistic) & Verdict \\",
            r"\midrule",
            *rows,
            r"\bottomrule",
            r"\end{tabular}",
            "",
        ]
    )


def number_text(v: Verdict) -> str:
    """The store's number of a verdict in one line (``Number.describe``), or "–" where there is none."""
    return "–" if v.number is None else v.number.describe()


def rows(verdicts: list[Verdict]) -> list[ClaimRow]:
    """The verdicts as the report's Claims section prints them."""
    return [
        ClaimRow(
            v.claim.id, v.claim.says, v.verdict, v.reason, number_text(v), v.number.lint if v.number else {}
        )
        for v in verdicts
    ]
