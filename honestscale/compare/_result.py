"""A comparison of A and B: the runs of each side, the pairs with their numbers and the rules' verdicts about them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from honestscale.analysis.points import lint_codes
from honestscale.analysis.stats import DECISION_RULE, MIN_INTERVAL_RUNS
from honestscale.compare._gate import CANNOT_JUDGE, Check, check
from honestscale.compare._measures import SCORE, TIME, Measure, measures
from honestscale.compare._pairs import Pair, Unpaired, pair
from honestscale.compare._select import Selector, SelectorError, check_found, parse
from honestscale.lint import Finding, LintResult, Suppression, formats, lint
from honestscale.view import COMPARED, Comparison, Run, View, comparisons

SCHEMA = "honestscale.compare/1"


@dataclass
class Compared:
    """One pair with its numbers and the findings about its runs (either side) or about the pair itself."""

    pair: Pair
    measures: list[Measure]
    findings: list[Finding] = field(default_factory=list)
    comparison: str = ""  # the id of the pair's comparison in the lint result

    def measure(self, kind: str) -> Measure | None:
        return next((m for m in self.measures if m.kind == kind), None)

    @property
    def verdicts(self) -> dict[str, list[str]]:
        """The rules failing or unverifiable on the pair's runs (the report's ``lint_codes`` of its findings)."""
        return lint_codes([f.as_json() for f in self.findings], {r.id for r in self.pair.runs})

    @property
    def caveat(self) -> str | None:
        """Why this pair's ratios do not compare like with like (HS112: different problems), or None."""
        what = "; ".join(d.text() for d in self.pair.problem_differs)
        return (
            f"A and B solve different problems ({what}): the ratios below do not compare like with like (HS112)"
            if what
            else None
        )

    def as_json(self) -> dict[str, object]:
        p = self.pair
        return {
            "pair": p.label, "comparison": self.comparison, "state_of_the_art": p.state_of_the_art, "caveat": self.caveat,
            "a": {"setup": p.a.label, "submission": p.a.submission, "runs": sorted(r.id for r in p.a.runs)},
            "b": {"setup": p.b.label, "submission": p.b.submission, "runs": sorted(r.id for r in p.b.runs)},
            "factor": [d.as_json() for d in p.factor], "confounds": [d.as_json() for d in p.confounds],
            "follows_from_the_factor": [c.as_json() for c in p.consequences],
            "differs": [d.as_json() for d in p.differs], "measures": [m.as_json() for m in self.measures],
            "verdicts": self.verdicts, "findings": [f.as_json() for f in self.findings],
        }  # fmt: skip


@dataclass
class Result:
    a: Selector
    b: Selector
    a_runs: list[Run]
    b_runs: list[Run]
    left_out: dict[
        str, list[str]
    ]  # why -> run ids selected but not compared (superseded, tuning or smoke runs)
    pairs: list[Compared]
    unpaired: list[Unpaired]
    lint: LintResult

    def gate(self, slower: float | None, faster: float | None, kind: str = TIME) -> list[Check]:
        """The gate's checks, one per pair and direction asked; ``kind``: time | throughput | energy."""
        out = []
        for c in self.pairs:
            m = c.measure(kind)
            for direction, threshold in (("slower", slower), ("faster", faster)):
                if threshold is None:
                    continue
                if c.pair.problem_differs:
                    what = "; ".join(d.text() for d in c.pair.problem_differs)
                    out.append(Check(c.pair.label, direction, threshold, m.name if m else kind, CANNOT_JUDGE,
                                     f"A and B solve different problems (HS112: {what}): compare like with like",
                                     "problem"))  # fmt: skip
                else:
                    got = check(c.pair.label, m, direction, threshold, kind)
                    if c.pair.confounds:
                        what = "; ".join(d.text() for d in c.pair.confounds)
                        got = replace(got, reason=f"{got.reason}; confounded (HS214): {what}")
                    out.append(got)
        return out

    @property
    def findings(self) -> list[Finding]:
        seen: dict[int, Finding] = {}
        for c in self.pairs:
            for f in c.findings:
                seen[id(f)] = f
        return list(seen.values())

    def as_sarif(self) -> dict[str, object]:
        """The findings about every pair as SARIF 2.1.0 (``compare --format sarif``), with the rules' verdicts."""
        return formats.as_sarif(LintResult(self.findings, self.lint.verdicts, self.lint.comparisons))

    def as_json(self, gate: Sequence[Check] = ()) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "a": {"selector": self.a.text, "filters": dict(self.a.filters), "runs": len(self.a_runs)},
            "b": {"selector": self.b.text, "filters": dict(self.b.filters), "runs": len(self.b_runs)},
            "left_out": self.left_out,
            "pairs": [c.as_json() for c in self.pairs],
            "unpaired": [u.as_json() for u in self.unpaired],
            "gate": [g.as_json() for g in gate],
            "statistics": {"time": "median of runs, order-statistic 95 % interval",
                           "rate": "harmonic mean of runs",
                           "ratio": "B / A, bootstrap over the runs of both sides (2,000 resamples, 95 %), "
                                    f"only with {MIN_INTERVAL_RUNS} or more runs a side",
                           "test": "two-sided Mann-Whitney U at 5 %", "decision_rule": DECISION_RULE},
        }  # fmt: skip


def select_side(view: View, selector: Selector, side: str, left_out: dict[str, list[str]]) -> list[Run]:
    named = selector.get("campaign")  # a campaign's runs only, from the view's index: not a scan of the store
    pool = view.runs if named is None or named.lower() in ("", "none", "null") else view.campaign_runs(named)
    found = selector.select(pool)
    check_found(selector, found, view.runs, side)
    kept = []
    for r in found:
        if r.id in view.superseded:
            left_out.setdefault("superseded by an edited campaign spec", []).append(r.id)
        elif (r.purpose or "final") not in COMPARED and "purpose" not in selector.names:
            left_out.setdefault(f"purpose {r.purpose} (context, not a result)", []).append(r.id)
        else:
            kept.append(r)
    if not kept:
        raise SelectorError(f"{side} {selector.text!r}: every run it selects is left out ({', '.join(left_out)})",
                            "select final runs, or name purpose= to compare others")  # fmt: skip
    return kept


def in_context(view: View, runs: Sequence[Run], extra: Sequence[Comparison] = ()) -> View:
    """The view the rules judge compared runs in: every run of the campaigns they belong to (the tuning study, the
    other points of the plan), as ``lint`` judges those campaigns, so that HS103 sees the trials and HS206 the
    whole plan, plus ``extra`` comparisons (the pairs). Findings are then read for the compared runs only."""
    names = {r.campaign for r in runs}
    context = [r for r in view.runs if r.campaign in names]
    seen = {r.id for r in context}
    context += [r for r in runs if r.id not in seen]
    ids = {r.id for r in context}  # the context's own step splits and rank times: never the whole store's
    fractions = {k: v for k, v in view.fractions.items() if k in ids}
    rank_times = {k: v for k, v in view.rank_times.items() if k in ids}
    return View(
        context, comparisons(context) + list(extra), view.campaigns, fractions, rank_times, view.superseded
    )


def pair_comparison(p: Pair, a: Selector, b: Selector) -> Comparison:
    """The pair as a comparison the rules judge (kind ``pair``): HS214 its confounds, HS112 and HS104 what differs."""
    key = {"a": a.text, "b": b.text, "factor": [d.as_json() for d in p.factor],
           "confounds": [d.as_json() for d in p.confounds], "differs": [d.as_json() for d in p.differs],
           "consequences": [c.as_json() for c in p.consequences], "state_of_the_art": p.state_of_the_art}  # fmt: skip
    return Comparison("pair", f"{a.text} vs {b.text}: {p.label}", p.runs, key)


def compare(view: View, a_text: str, b_text: str, *, factor: Sequence[str] = (),
            suppressions: Sequence[Suppression] = ()) -> Result:  # fmt: skip
    """Compare the runs ``a_text`` selects with those ``b_text`` selects (see ``honestscale.compare``)."""
    from honestscale.compare._select import resolve

    a, b = parse(a_text, view.runs), parse(b_text, view.runs)
    named = [resolve(f, view.runs) for f in factor]
    left_out: dict[str, list[str]] = {}
    a_runs, b_runs = select_side(view, a, "A", left_out), select_side(view, b, "B", left_out)
    both = sorted({r.id for r in a_runs} & {r.id for r in b_runs})
    if both:
        raise SelectorError(f"A and B share {len(both)} run(s): {', '.join(both[:3])}",
                            "make the selectors exclusive (add a filter that tells the sides apart)")  # fmt: skip
    pairs, unpaired = pair(a_runs, b_runs, a, b, named)
    items = [(p, pair_comparison(p, a, b)) for p in pairs]
    result = lint(in_context(view, [*a_runs, *b_runs], [c for _, c in items]), suppressions=suppressions)
    out = []
    for p, c in items:
        ids = {r.id for r in p.runs}
        mine = [
            f
            for f in result.findings
            if f.target == c.id or (set(f.runs) & ids and not f.target.startswith("pair:"))
        ]
        out.append(Compared(p, measures(p.a.runs, p.b.runs, p.state_of_the_art), mine, c.id))
    return Result(a, b, a_runs, b_runs, left_out, out, unpaired, result)


__all__ = ["SCHEMA", "SCORE", "Compared", "Result", "compare"]
