"""Lint results as text for people, JSON for scripts, SARIF 2.1.0 for code-scanning dashboards."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

import honestscale
from honestscale.analysis.points import FindingRecord
from honestscale.display import shown_text
from honestscale.lint._engine import REACHES, LintResult, Rule
from honestscale.lint._runner import registry, resolve
from honestscale.view import kind_words


def _t(text: str, style: str = "") -> Text:
    """Text as the terminal shows it: names' bidirectional controls and other control characters escaped
    (``honestscale.display.shown_text``), never reordering what is printed beside them."""
    return Text(shown_text(text), style=style)


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_OUTCOME = {"fail": "FAIL", "cannot_verify": "CANNOT VERIFY"}


def as_json(result: LintResult) -> list[FindingRecord]:
    return [f.as_json() for f in result.findings]


def as_text(result: LintResult) -> Group:
    rules = registry()
    parts: list[Any] = []
    by_target: dict[str, list[Any]] = defaultdict(list)
    for f in result.findings:
        by_target[f.target].append(f)
    for target, findings in by_target.items():
        parts.append(_t(f"\n{target}", style="bold"))
        for f in findings:
            head = _t("  ")
            head.append(f"{f.code} ", style="bold")
            head.append(f"{_OUTCOME[f.outcome]} " if not f.suppressed else "SUPPRESSED ",
                        style=_STYLE.get(f.severity, "") if not f.suppressed else "dim")  # fmt: skip
            head.append(f"({f.severity}, {rules[f.code].name}) ")
            head.append(shown_text(f.message))
            parts.append(head)
            if f.suppressed:
                parts.append(_t(f"      justification: {f.suppressed}", style="dim"))
                continue
            if f.evidence:
                parts.append(_t("      evidence: " + json.dumps(f.evidence, default=str), style="dim"))
            parts.append(_t(f"      fix: {f.fix}"))
            shown = ", ".join(f.runs[:4]) + (f" (+{len(f.runs) - 4} more)" if len(f.runs) > 4 else "")
            parts.append(_t(f"      runs: {shown}", style="dim"))
    table = Table(title="\nverdicts per rule (comparisons passed / failed / cannot verify / suppressed)",
                  title_justify="left")  # fmt: skip
    for col in ("rule", "name", "severity", "verdict", "pass", "fail", "cannot verify", "suppressed"):
        table.add_column(col)
    for v in result.verdicts:
        style = {"fail": "red", "cannot_verify": "yellow", "pass": "green"}.get(v.outcome, "dim")
        table.add_row(v.code, v.name, v.severity, _t(v.outcome, style=style), str(v.passed), str(v.failed),
                      str(v.cannot_verify), str(v.suppressed))  # fmt: skip
    parts.append(table)
    kinds: dict[str, int] = defaultdict(int)
    for c in result.comparisons:
        kinds[c.kind] += 1
    parts.append(
        _t(f"{len(result.comparisons)} comparisons: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    )
    for c in result.comparisons:
        if c.kind == "scaling":
            parts.append(
                _t(
                    f"  scaling series {c.label}: {kind_words(c.mode)} scaling, workers {list(c.by_workers())}"
                )
            )
            if c.hardware_note:  # on the series itself, not only in a hardware comparison
                parts.append(_t(f"    {c.hardware_note}", style="yellow"))
            if c.split:  # the label that parts its points from others of the submitter's (view.label_splits)
                parts.append(_t(f"    {c.split}", style="yellow"))
    if result.errors:
        codes = ", ".join(sorted({f.code for f in result.errors}))
        parts.append(_t(f"{len(result.errors)} error-severity finding(s) fail ({codes}): exit code 1; every "
                          "number they are about is marked do not quote", style="bold red"))  # fmt: skip
    return Group(*parts)


def _level(severity: str) -> str:
    return {"error": "error", "warning": "warning"}.get(severity, "note")


def as_sarif(result: LintResult) -> dict[str, object]:
    """SARIF 2.1.0: one result per finding, located at the event file of the first run involved."""
    rules = registry()
    files: dict[str, str] = {}
    for c in result.comparisons:
        for r in c.runs:
            if r.source_file:
                files[r.id] = str(r.source_file)

    def rule_entry(cls: type[Rule]) -> dict[str, object]:
        doc = cls.doc_sections()
        return {
            "id": cls.code,
            "name": cls.name,
            "shortDescription": {"text": cls.summary},
            "fullDescription": {"text": doc.get("What it checks", cls.summary)},
            "help": {"text": f"{doc.get('Why it misleads', '')}\nFix: {doc.get('Fix', '')}"},
            "defaultConfiguration": {"level": _level(cls.severity)},
        }

    results = []
    for f in result.findings:
        where = files.get(f.runs[0]) if f.runs else None
        res: dict[str, object] = {
            "ruleId": f.code,
            "level": _level(f.severity) if f.outcome == "fail" else "note",
            "message": {"text": f"{f.message}. Fix: {f.fix}"},
            "logicalLocations": [{"name": f.target, "kind": "module"}],
            "properties": {"outcome": f.outcome, "runs": f.runs, "evidence": f.evidence},
        }
        if where:
            res["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": Path(where).as_uri()}}}]
        if f.suppressed:
            res["suppressions"] = [{"kind": "external", "justification": f.suppressed}]
        results.append(res)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "honestscale",
                        "version": honestscale.__version__,
                        "informationUri": "https://github.com/honestscale/honestscale",
                        "rules": [rule_entry(cls) for cls in rules.values()],
                    }
                },
                "results": results,
            }
        ],
    }


def explain(token: str) -> str:
    """The rule's documentation; ``token`` is its code, its name or a name it had before (then noted first)."""
    rules = registry()
    codes, note = resolve(token, rules)
    if len(codes) != 1:
        raise KeyError(token)
    cls = rules[codes.pop()]
    doc = cls.doc_sections()
    lines = [f"note: {note}", ""] if note else []
    lines += [f"{cls.code} {cls.name} ({cls.severity})", "", cls.summary, ""]
    for section in ("What it checks", "Why it misleads", "Example", "Fix", "Reference"):
        lines += [f"{section}:", "  " + doc.get(section, "").replace("\n", "\n  "), ""]
    return "\n".join(lines).rstrip() + "\n"


QUOTING_BEGIN = (
    "<!-- the rules that mark a number: generated by `honestscale lint --quoting-doc`, do not edit -->"
)
QUOTING_END = "<!-- end of the generated list -->"


def quoting_markdown() -> str:
    """The rules that can make a number "not quotable" / "do not quote" (every error-severity rule, when it fails)
    and which numbers each marks (its ``reach``), from the rules' own declarations: the block docs/claims.md and
    docs/predict.md hold between ``QUOTING_BEGIN`` and ``QUOTING_END`` (``honestscale lint --quoting-doc``)."""
    out = [QUOTING_BEGIN, "", "| rule | fails on | marks |", "|---|---|---|"]
    for cls in registry().values():
        if cls.severity == "error":
            marks = "; some findings: ".join(REACHES[r] for r in (cls.reach, *cls.other_reaches))
            out.append(
                f"| [{cls.code}](rules.md#{cls.code.lower()}-{cls.name}) {cls.name} | {cls.summary} | {marks} |"
            )
    return "\n".join([*out, "", QUOTING_END]) + "\n"


def rules_markdown() -> str:
    """docs/rules.md: generated from the rule docstrings by `honestscale lint --rules-doc`."""
    out = ["# The honest-metrics rules", "",
           "Generated from the rule docstrings by `honestscale lint --rules-doc`; do not edit by hand. A rule is "
           "named after the bad practice it finds; `--select`, `--ignore`, `--explain` and a suppression's `code` "
           "take its code or its name.", "",
           "| code | name | severity | checks |", "|---|---|---|---|"]  # fmt: skip
    rules = registry()
    for cls in rules.values():
        out.append(
            f"| [{cls.code}](#{cls.code.lower()}-{cls.name}) | {cls.name} | {cls.severity} | {cls.summary} |"
        )
    for cls in rules.values():
        doc = cls.doc_sections()
        out += ["", f"## {cls.code} {cls.name}", "", f"Severity: **{cls.severity}**.", ""]
        if cls.old_names:
            out += [f"Formerly {', '.join(f'`{n}`' for n in cls.old_names)} (an imperative; still accepted, with a "
                    "note, until 0.2).", ""]  # fmt: skip
        for section in ("What it checks", "Why it misleads", "Example", "Fix", "Reference"):
            out += [f"**{section}.** " + " ".join(doc.get(section, "").split()), ""]
    return "\n".join(out).rstrip() + "\n"
