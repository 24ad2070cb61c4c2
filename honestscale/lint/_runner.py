"""The registry of rules (one module per rule under ``honestscale.lint.rules``) and the run of every rule over the
view, with suppressions."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable

from honestscale.errors import HonestscaleError
from honestscale.lint._engine import Finding, LintResult, Rule, Suppression, Verdict
from honestscale.view import View


def registry() -> dict[str, type[Rule]]:
    """Every rule module under ``honestscale.lint.rules``, by code."""
    from honestscale.lint import rules as package

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Rule)
                and obj is not Rule
                and obj.__module__ == module.__name__
            ):
                if obj.code in found:
                    raise RuntimeError(
                        f"rule code {obj.code} defined twice ({found[obj.code].__module__}, {module.__name__})"
                    )
                found[obj.code] = obj
    return dict(sorted(found.items()))


def by_name(token: str, known: dict[str, type[Rule]]) -> tuple[type[Rule], str | None] | None:
    """The rule of this name, or of a name it had before (then with the note that says the new one); None if none."""
    given = token.strip().lower()
    for cls in known.values():
        if given == cls.name:
            return cls, None
        if given in cls.old_names:
            return cls, (f"rule name {token.strip()!r} is deprecated: {cls.code} is now {cls.name!r} (rules are named "
                         "after the bad practice); the old name works until 0.2")  # fmt: skip
    return None


def resolve(token: str, known: dict[str, type[Rule]]) -> tuple[set[str], str | None]:
    """The codes a rule is named by: a code (HS106), a prefix (HS1: HS101..HS112), its name (io-not-considered) or
    a name it had before (accepted, with the note that says the new one)."""
    given = token.strip()
    if given.upper().startswith("HS"):
        matched = {k for k in known if k.startswith(given.upper())}
        if matched:
            return matched, None
    named = by_name(given, known)
    if named is None:
        raise HonestscaleError(f"no rule {given!r}",
                               f"name a rule by its code ({', '.join(known)}), a prefix (HS1) or its name "
                               "(honestscale lint --rules-doc lists them)")  # fmt: skip
    return {named[0].code}, named[1]


def _codes(spec: Iterable[str] | None, known: dict[str, type[Rule]], notes: list[str]) -> set[str] | None:
    if spec is None:
        return None
    out: set[str] = set()
    for item in spec:
        for token in filter(None, (c.strip() for c in item.split(","))):
            matched, note = resolve(token, known)
            notes += [note] if note else []
            out |= matched
    return out


def run(view: View, *, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
        suppressions: Iterable[Suppression] = ()) -> LintResult:  # fmt: skip
    known = registry()
    notes: list[str] = []
    chosen = _codes(select, known, notes) or set(known)
    chosen -= _codes(ignore, known, notes) or set()
    supp = list(suppressions)
    notes += sorted({s.note for s in supp if s.note})
    findings: list[Finding] = []
    verdicts: list[Verdict] = []
    for code, cls in known.items():
        if code not in chosen:
            continue
        rule = cls()
        verdict = Verdict(code, cls.name, cls.severity)
        for target in rule.targets(view):
            got = list(rule.check(target, view))
            campaign = target.key.get("campaign")
            for f in got:
                why = next((s.reason for s in supp if s.code == code and s.campaign == campaign), None)
                f.suppressed = why
            live = [f for f in got if not f.suppressed]
            if not got:
                verdict.passed += 1
            elif not live:
                verdict.suppressed += 1
            elif any(f.outcome == "fail" for f in live):
                verdict.failed += 1
            else:
                verdict.cannot_verify += 1
            findings.extend(got)
        verdicts.append(verdict)
    return LintResult(findings, verdicts, view.comparisons, supp, notes)
