"""Every rule against campaigns built from events: the cases in tests/lint_cases/HSnnn.yaml.

Each case starts from a careful campaign (tests/lint_campaigns.py) and changes what its rule is
about; the rule must then fail, say it cannot verify, or pass (having actually checked something). A failing case
may name the severity its findings must have (``severity``) and words their messages must hold (``says``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from honestscale.compare import compare
from honestscale.lint import lint, registry
from honestscale.lint._engine import SECTIONS
from honestscale.view import build as build_view
from tests.conftest import REPO
from tests.lint_campaigns import build, case_runs, open_ro

CASES_DIR = Path(__file__).parent.parent / "lint_cases"
SNAPSHOTS = CASES_DIR / "snapshots"


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(CASES_DIR.glob("HS*.yaml")):
        doc = yaml.safe_load(path.read_text())
        assert doc["rule"] == path.stem, path
        out.extend((doc["rule"], case) for case in doc["cases"])
    return out


CASES = _cases()


@pytest.mark.parametrize(("code", "case"), CASES, ids=[f"{c}-{k['name'][:50]}" for c, k in CASES])
def test_rule_case(tmp_path: Path, code: str, case: dict[str, Any]) -> None:
    store = build(tmp_path, case | {"runs": case_runs(case)})
    con = open_ro(store)
    try:
        view = build_view(con)
    finally:
        con.close()
    if "compare" in case:  # a rule about the pairs of `honestscale compare A B`: judged on that comparison
        c = case["compare"]
        result = compare(view, c["a"], c["b"], factor=c.get("factor", ())).lint
        result.findings = [f for f in result.findings if f.code == code]
    else:
        result = lint(view, select=[code])
    mine = [f for f in result.findings if f.code == code]
    (verdict,) = [v for v in result.verdicts if v.code == code]
    outcomes = {f.outcome for f in mine}
    rule = registry()[code]  # every finding marks the numbers its rule declares (docs/claims.md lists them)
    assert {f.reach for f in mine} <= {rule.reach, *rule.other_reaches}
    detail = [(f.outcome, f.target, f.message) for f in mine]
    if case["expect"] == "pass":
        assert not mine, detail
        assert verdict.passed >= 1, "the rule checked nothing: a pass case must give it something to check"
    elif case["expect"] == "fail":
        assert "fail" in outcomes, detail
        assert all(f.fix and f.runs for f in mine)
        failing = [f for f in mine if f.outcome == "fail"]
        if "severity" in case:  # a rule whose severity depends on what it finds (HS209)
            assert {f.severity for f in failing} == {case["severity"]}, detail
        for said in case.get("says", []):
            assert any(said in f.message for f in failing), (said, detail)
    else:
        assert outcomes == {"cannot_verify"}, detail
        assert all(f.message.startswith("cannot verify:") and f.fix for f in mine)
        for said in case.get("says", []):
            assert any(said in f.message for f in mine), (said, detail)
    if mine:
        _snapshot(code, case["name"], mine, tmp_path)


def _plain(value: Any, tmp: str) -> Any:
    """Evidence as JSON a snapshot can hold on any machine: floats to 6 significant digits (the last bits of a
    bootstrap or a sum differ between BLAS builds; below 1e-12 a rounding residue, 0), the case's temporary folder
    as ``<tmp>``."""
    if isinstance(value, float):
        return 0.0 if abs(value) < 1e-12 else float(f"{value:.6g}")
    if isinstance(value, str):
        return value.replace(tmp, "<tmp>")
    if isinstance(value, dict):
        return {str(k): _plain(v, tmp) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, tmp) for v in value]
    return value if value is None or isinstance(value, (bool, int)) else _plain(str(value), tmp)


def _snapshot(code: str, case: str, findings: list[Any], tmp: Path) -> None:
    """The case's findings as a reader sees them (rule, severity, outcome, target, message, fix), their evidence
    (what ``--format json`` gives) and the numbers they mark (``reach``) equal the stored snapshot (ruff's message snapshots): a changed wording or
    evidence is a reviewed change. ``HONESTSCALE_UPDATE_SNAPSHOTS=1`` writes them anew; ``git diff
    tests/lint_cases/snapshots`` then shows what changed."""
    rules = registry()
    lines = []
    for f in sorted(findings, key=lambda f: (f.outcome, f.target, f.message)):
        evidence = json.dumps(_plain(f.evidence, str(tmp)), sort_keys=True)
        # which numbers the finding marks, where not the runs' (a ratio of rates, a point's own number)
        reach = [f"  reach: {f.reach}"] if f.reach != "runs" else []
        lines += [f"{f.code} {rules[f.code].name} ({f.severity}) {f.outcome}: {f.target}", f"  {f.message}",
                  f"  fix: {f.fix}", f"  evidence: {evidence}", *reach, ""]  # fmt: skip
    text = "\n".join(lines)
    path = SNAPSHOTS / code / f"{re.sub(r'[^a-z0-9]+', '-', case.lower()).strip('-')[:80]}.txt"
    if os.environ.get("HONESTSCALE_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), (
        f"no snapshot {path}: run HONESTSCALE_UPDATE_SNAPSHOTS=1 pytest {__file__} and review it"
    )
    assert text == path.read_text(encoding="utf-8"), (
        f"{path} changed: review, then HONESTSCALE_UPDATE_SNAPSHOTS=1"
    )


def test_every_rule_is_documented_and_has_failing_and_passing_cases() -> None:
    rules = registry()
    assert list(rules) == sorted(rules) and len(rules) >= 19
    assert [c for c in rules if c.startswith("HS1")] == [f"HS1{n:02d}" for n in range(1, 13)]
    by_rule: dict[str, set[str]] = {}
    for code, case in CASES:
        by_rule.setdefault(code, set()).add(case["expect"])
    names = set()
    for code, cls in rules.items():
        assert cls.severity in ("error", "warning", "info"), code
        assert cls.name not in names and cls.name == cls.name.lower()
        names.add(cls.name)
        sections = cls.doc_sections()
        assert set(SECTIONS) <= set(sections), f"{code} lacks {set(SECTIONS) - set(sections)}"
        assert all(len(sections[s]) > 20 for s in SECTIONS), code
        assert cls.__module__.split(".")[-1].startswith(code.lower() + "_"), (
            "one module per rule, named after it"
        )
        assert "pass" in by_rule.get(code, set()), f"{code} has no passing case"
        assert "fail" in by_rule.get(code, set()), f"{code} has no failing case"


def test_rules_page_is_generated_from_the_docstrings() -> None:
    from honestscale.lint._formats import rules_markdown

    assert (REPO / "docs" / "rules.md").read_text() == rules_markdown(), (
        "regenerate: honestscale lint --rules-doc > docs/rules.md"
    )


@pytest.mark.parametrize("page", ["claims.md", "predict.md"])
def test_the_pages_list_exactly_the_rules_that_mark_a_number(page: str) -> None:
    """docs/claims.md and docs/predict.md hold the list of the rules that can make a number "do not quote" and what
    each marks, as the rules declare it (severity, ``reach``): a rule whose severity or reach changes fails this."""
    from honestscale.lint._formats import QUOTING_BEGIN, QUOTING_END, quoting_markdown

    text = (REPO / "docs" / page).read_text()
    start, end = text.index(QUOTING_BEGIN), text.index(QUOTING_END) + len(QUOTING_END)
    assert text[start:end] + "\n" == quoting_markdown(), (
        f"docs/{page} is stale: paste `honestscale lint --quoting-doc` over its generated list"
    )
    assert "HS111" in quoting_markdown() and "HS202" not in quoting_markdown()  # errors only: HS202 warns
