"""One verdict per claim: supported, contradicted, not quotable or cannot verify, with the evidence beside it.

- ``about V ± tolerance``: supported when the store's number lies within the tolerance of V and V inside its 95 %
  interval; contradicted when V ± tolerance and the interval do not overlap; otherwise cannot verify. A number
  with no interval by its nature (an MLPerf score) is decided by the tolerance alone, and says so; one with too
  few runs for an interval cannot be verified, and says how many more runs it needs.
- ``at_least V`` / ``at_most V``: supported when the whole interval lies on the claimed side of V, contradicted
  when it lies wholly on the other, otherwise cannot verify.
- ``faster`` / ``slower``: two run sets (``than``) by ``compare``'s decision rule, a point against its series'
  base case by the interval of its speedup: reversed or no significant difference is contradicted.
- A number an error-severity rule fails on (HS209's explained superlinear point, HS213's impossible times, an MFU
  over 100 %: "do not quote") is not quotable, whatever it says.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from honestscale import exits
from honestscale.analysis.points import sig, verdicts_text
from honestscale.analysis.scaling import TTT, time_to_accuracy
from honestscale.analysis.stats import DISAGREE, SAME
from honestscale.claims._file import Claim, ClaimsFile, Tolerance
from honestscale.claims._numbers import CannotVerify, Models, Number, point_number
from honestscale.compare import Compared, Measure, SelectorError, compare, time_of
from honestscale.view import View

SUPPORTED, CONTRADICTED, NOT_QUOTABLE, CANNOT_VERIFY = (
    "supported",
    "contradicted",
    "not quotable",
    "cannot verify",
)
VERDICTS = (SUPPORTED, CONTRADICTED, NOT_QUOTABLE, CANNOT_VERIFY)
STATISTIC_WORDS = {
    "median": "the median of runs",
    "mean": "the arithmetic mean of runs",
    "hmean": "the harmonic mean of runs",
    "best": "the best run",
    "single": "a single run",
}


@dataclass
class Verdict:
    claim: Claim
    verdict: str
    reason: str
    number: Number | None = None
    evidence: list[str] = field(default_factory=list)
    runs: tuple[str, ...] = ()
    changed: str | None = None  # how its run set differs from the one ``claims lock`` recorded

    def as_json(self) -> dict[str, Any]:
        c, n = self.claim, self.number
        return {
            "id": c.id,
            "says": c.says,
            "line": c.line,
            "measure": c.measure,
            "runs_selector": c.runs,
            "than": c.than,
            "at": dict(c.at),
            "relation": c.relation,
            "value": c.value,
            "tolerance": None if c.tolerance is None else c.tolerance.text(),
            "statistic": c.statistic,
            "verdict": self.verdict,
            "reason": self.reason,
            "evidence": self.evidence,
            "runs": list(self.runs),
            "changed_since_lock": self.changed,
            "number": None
            if n is None
            else {
                "name": n.name,
                "value": n.value,
                "low": n.low,
                "high": n.high,
                "n": n.n,
                "unit": n.unit,
                "statistic": n.statistic,
                "no_interval_because": n.by_nature,
                "rules": n.lint,
            },
        }


def _ci(low: float | None, high: float | None) -> str:
    return f"[{sig(low)}, {sig(high)}]" if low is not None and high is not None else "no interval"


def about(x: Number, value: float, tol: Tolerance) -> tuple[str, str]:
    lo, hi = value - tol.of(value), value + tol.of(value)
    within = lo <= x.value <= hi
    claimed = f"{sig(value)} ± {tol.text()}"
    if x.has_interval:
        assert x.low is not None and x.high is not None
        if within and x.low <= value <= x.high:
            return (
                SUPPORTED,
                f"{sig(x.value)} lies within {claimed}, and {sig(value)} inside its 95 % interval",
            )
        if hi < x.low or lo > x.high:
            return CONTRADICTED, f"{claimed} and the 95 % interval {_ci(x.low, x.high)} do not overlap"
        why = (
            f"{sig(x.value)} is not within {claimed}"
            if not within
            else f"{sig(value)} lies outside the interval"
        )
        return (
            CANNOT_VERIFY,
            f"{why}, but the interval {_ci(x.low, x.high)} overlaps {claimed}: more runs decide",
        )
    if x.by_nature:
        verdict = SUPPORTED if within else CONTRADICTED
        return (
            verdict,
            f"{sig(x.value)} {'lies' if within else 'does not lie'} within {claimed} ({x.by_nature}: the tolerance "
            "alone decides)",
        )
    return CANNOT_VERIFY, (
        f"{sig(x.value)} {'lies' if within else 'does not lie'} within {claimed}, but {x.n} "
        f"run(s) give no interval: {x.more_runs} more successful run(s) would"
    )


def bound(x: Number, value: float, at_least: bool) -> tuple[str, str]:
    word = "at least" if at_least else "at most"
    if x.has_interval:
        assert x.low is not None and x.high is not None
        if (x.low >= value) if at_least else (x.high <= value):
            return SUPPORTED, f"the whole 95 % interval {_ci(x.low, x.high)} is {word} {sig(value)}"
        if (x.high < value) if at_least else (x.low > value):
            return (
                CONTRADICTED,
                f"the whole 95 % interval {_ci(x.low, x.high)} is on the other side of {sig(value)}",
            )
        return CANNOT_VERIFY, f"the 95 % interval {_ci(x.low, x.high)} holds {sig(value)}: more runs decide"
    holds = x.value >= value if at_least else x.value <= value
    if x.by_nature:
        return (
            (SUPPORTED if holds else CONTRADICTED),
            f"{sig(x.value)} is {'' if holds else 'not '}{word} {sig(value)} ({x.by_nature}: the number alone decides)",
        )
    return CANNOT_VERIFY, (
        f"{sig(x.value)} is {'' if holds else 'not '}{word} {sig(value)}, but {x.n} run(s) give no "
        f"interval: {x.more_runs} more successful run(s) would"
    )


def _ordered_point(claim: Claim, x: Number) -> tuple[str, str]:
    """A point against its series' base case: its speedup's interval (> 1: faster) decides."""
    faster = claim.relation == "faster"
    if not x.has_interval and x.by_nature:
        right = (x.value > 1) == faster
        return (SUPPORTED if right else CONTRADICTED), (
            f"{x.name} {sig(x.value)}: {'faster' if x.value > 1 else 'slower'} than the base case ({x.by_nature})"
        )
    if not x.has_interval:
        return CANNOT_VERIFY, (
            f"{x.name} {sig(x.value)} with no interval from {x.n} run(s) a point: "
            f"{x.more_runs} more successful run(s) at each would give one"
        )
    assert x.low is not None and x.high is not None
    if x.low > 1 or x.high < 1:
        right = (x.low > 1) == faster
        return (SUPPORTED if right else CONTRADICTED), (
            f"{x.name} {sig(x.value)}, 95 % interval {_ci(x.low, x.high)} {'above' if x.low > 1 else 'below'} 1: "
            f"{'faster' if x.low > 1 else 'slower'} than the base case"
        )
    return (
        CONTRADICTED,
        f"{x.name} {sig(x.value)}, 95 % interval {_ci(x.low, x.high)} holds 1: no significant difference",
    )


def _statistic_note(claim: Claim, x: Number) -> str | None:
    """Where the paper names another statistic than the store's: which one the data gives, and the named one."""
    if claim.statistic is None:
        return None
    ours = "hmean" if "harmonic" in x.statistic else "median"
    if claim.statistic == ours:
        return None
    named = STATISTIC_WORDS[claim.statistic]
    note = f"the claim names {named}; the store's number is {x.statistic}"
    if x.values and claim.statistic in ("best", "mean"):
        other = (
            (min(x.values) if x.better == "lower" else max(x.values))
            if claim.statistic == "best"
            else statistics.fmean(x.values)
        )
        note += f" ({named}: {sig(other)}, judged at the store's {sig(x.value)})"
        if (
            claim.value is not None
            and claim.tolerance is not None
            and abs(other - claim.value) <= claim.tolerance.of(claim.value)
        ):
            note += f": {sig(claim.value)} is {named}'s value, not a typical run's"
    return note


def _judge_point(view: View, claim: Claim, where: str, models: Models | None = None) -> Verdict:
    x, notes = point_number(view, claim, where, models)
    if claim.relation == "about":
        assert claim.value is not None and claim.tolerance is not None
        verdict, reason = about(x, claim.value, claim.tolerance)
    elif claim.relation in ("at_least", "at_most"):
        assert claim.value is not None
        verdict, reason = bound(x, claim.value, claim.relation == "at_least")
    else:
        verdict, reason = _ordered_point(claim, x)
    evidence = [
        x.describe(),
        *notes,
        f"rules on these runs: {verdicts_text(x.lint)}",
    ]
    if note := _statistic_note(claim, x):
        evidence.append(note)
    return _quotable(Verdict(claim, verdict, reason, x, evidence, x.runs), x.lint)


def _quotable(v: Verdict, lint: dict[str, list[str]]) -> Verdict:
    if lint.get("error"):
        v.evidence.insert(0, f"as the store says it: {v.verdict} ({v.reason})")
        v.verdict, v.reason = (
            NOT_QUOTABLE,
            (f"do not quote: error-severity {', '.join(lint['error'])} fails on the runs behind this number"),
        )
    return v


def _time_named(compared: Compared, claim: Claim, chosen: str) -> Measure:
    """The time the claim names where ``compare`` decided on the other one: the time to train is every run's (every
    run that reached its target trained); a time to accuracy needs every successful run to have reached its
    target, and the reason names those that did not."""
    pair = compared.pair
    if claim.measure == "time_to_train":
        return time_of(pair.a.runs, pair.b.runs, TTT)
    short = sorted(r.id for r in pair.runs if r.ok and time_to_accuracy(r) is None)
    named = ", ".join(short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else "")
    raise CannotVerify(
        f"the claim is about the time to accuracy, but {len(short)} successful run(s) recorded no time reaching "
        f"their target ({named}): the store compares the {chosen}; claim the time to train, or record the target"
    )


def at_point(selector: str, at: tuple[tuple[str, str], ...]) -> str:
    """A selector with the claim's point (``at``) added to its filters: an ordering at one scale compares the runs
    of that scale on both sides (a bare campaign name becomes ``campaign=NAME``; a value with a comma is quoted)."""
    if not at:
        return selector
    filters = selector if "=" in selector else f"campaign={selector}"
    point = ",".join(f'{k}="{v}"' if "," in v else f"{k}={v}" for k, v in at)
    return f"{filters},{point}"


def _judge_ordering(view: View, claim: Claim, where: str) -> Verdict:
    assert claim.than is not None
    a, b = at_point(claim.runs, claim.at), at_point(claim.than, claim.at)
    try:  # a side that selects nothing: what is missing, with the file's line and compare's fix
        result = compare(view, a, b)
    except SelectorError as exc:
        raise CannotVerify(f"{exc.message} ({where}){f': {exc.fix}' if exc.fix else ''}") from None
    if len(result.pairs) != 1:
        labels = "; ".join(c.pair.label for c in result.pairs[:4]) or "none"
        raise CannotVerify(
            f"the two run sets pair into {len(result.pairs)} setups ({labels}): an ordering is about "
            "one pair; add filters that keep one setup a side"
        )
    compared = result.pairs[0]
    kind = {"throughput": "throughput", "energy": "energy"}.get(claim.measure, "time")
    m = compared.measure(kind)
    if m is None or m.slowdown is None:
        raise CannotVerify(f"no {claim.measure.replace('_', ' ')} on a side")
    wanted = claim.measure.replace("_", " ")
    if kind == "time" and m.name != wanted:
        m = _time_named(compared, claim, m.name)
    slow = m.slowdown  # how much slower B (than) is than A (runs): > 1 when A is faster
    if slow is None:
        raise CannotVerify(f"no {wanted} on a side")
    evidence = [
        m.sentence(),
        f"A = {a} ({m.a.ok} runs), B = {b} ({m.b.ok} runs)",
        f"rules on these runs: {verdicts_text(compared.verdicts)}",
    ]
    runs = tuple(sorted(r.id for r in compared.pair.runs))
    faster = claim.relation == "faster"
    factor = (
        slow if faster else slow.inverse()
    )  # the claimed direction's factor: A is `factor`x faster/slower
    number = Number(
        f"{m.name}: {claim.runs} against {claim.than}",
        factor.value,
        factor.low,
        factor.high,
        min(m.a.ok, m.b.ok),
        f"{m.statistic}, ratio of the two sides",
        "x",
        runs,
        compared.verdicts,
    )
    if claim.value is not None:
        assert claim.tolerance is not None
        verdict, reason = about(number, claim.value, claim.tolerance)
        return _quotable(
            Verdict(
                claim,
                verdict,
                f"A is {sig(factor.value, 3)}x {claim.relation} than B: {reason}",
                number,
                evidence,
                runs,
            ),
            compared.verdicts,
        )
    d = m.difference
    assert d is not None
    if not d.testable:
        verdict, reason = CANNOT_VERIFY, d.describe()
    elif d.verdict == DISAGREE:
        verdict, reason = CANNOT_VERIFY, f"{d.describe()}: more runs decide"
    elif d.verdict == SAME:
        verdict, reason = CONTRADICTED, d.describe()
    else:
        right = (slow.value > 1) == faster
        verdict = SUPPORTED if right else CONTRADICTED
        how = (
            f"{sig(factor.value, 3)}x {claim.relation}"
            if right
            else f"reversed: {sig(1 / factor.value, 3)}x " + ("slower" if faster else "faster")
        )
        reason = f"A is {how} than B, a significant difference by compare's decision rule"
    return _quotable(Verdict(claim, verdict, reason, number, evidence, runs), compared.verdicts)


def judge(view: View, claim: Claim, where: str, models: Models | None = None) -> Verdict:
    """The verdict on one claim; what is missing (runs, a base case, a measure) is 'cannot verify', said.
    ``models``: the analysis models already made of the campaigns' contexts (``check`` shares one between claims)."""
    try:
        if claim.than is not None:
            return _judge_ordering(view, claim, where)
        return _judge_point(view, claim, where, models)
    except CannotVerify as missing:
        return Verdict(claim, CANNOT_VERIFY, str(missing))


def check(view: View, claims: ClaimsFile) -> list[Verdict]:
    """Every claim's verdict; the analysis of each set of campaigns the claims are about is made once."""
    models: Models = {}
    return [judge(view, c, f"{claims.path} line {c.line}", models) for c in claims.claims]


def exit_code(verdicts: list[Verdict], allow_drift: bool = False) -> int:
    """0 every claim supported; 1 any contradicted or not quotable, or (unless ``allow_drift``) any whose runs changed
    since the lock (it outranks 3); 3 otherwise any unverifiable."""
    found = {v.verdict for v in verdicts}
    if found & {CONTRADICTED, NOT_QUOTABLE} or (not allow_drift and any(v.changed for v in verdicts)):
        return exits.FAILED
    return exits.CANNOT_JUDGE if CANNOT_VERIFY in found else exits.OK
