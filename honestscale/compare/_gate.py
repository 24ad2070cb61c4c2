"""The CI gate, with three outcomes. ``--fail-if-slower 5%`` **fails** only on a change that the decision rule calls
significant (``analysis.stats.DECISION_RULE``: SC15 rule 7) and whose 95 % interval lies beyond the threshold;
**passes** only where the data rule such a change out: B significantly faster, or the 95 % interval of B's
slowdown wholly below the threshold; and otherwise **cannot judge** (its own exit code, never a pass), saying what
is missing: the measure on a side, runs (too few for a test or an interval, or an interval too wide to tell the
change from the threshold), a verdict (the tests disagree), or a like-for-like problem. Each check says why."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from honestscale import exits
from honestscale.analysis.points import sig
from honestscale.analysis.stats import MIN_INTERVAL_RUNS
from honestscale.compare._measures import Measure
from honestscale.errors import HonestscaleError

PASS, FAIL, CANNOT_JUDGE = "pass", "fail", "cannot judge"
# compare's exit codes: 0 every check passed, 1 a check failed, 3 none failed but one could not judge
# (2 is a usage error, as for every command)
EXIT_PASS, EXIT_FAIL, EXIT_CANNOT_JUDGE = exits.OK, exits.FAILED, exits.CANNOT_JUDGE  # honestscale.exits


def parse_threshold(text: str, option: str) -> float:
    """``5%``, ``5 %`` or ``0.05`` as the fraction 0.05."""
    raw = text.strip().replace(" ", "")
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise HonestscaleError(f"{option} {text!r} is not a percentage", f"write it as {option} 5%") from None
    if not 0 <= value < 10 or math.isnan(value):
        raise HonestscaleError(f"{option} {text!r} is out of range", "a threshold from 0% to 1000%")
    return value


@dataclass(frozen=True)
class Check:
    pair: str
    direction: str  # slower | faster
    threshold: float
    measure: str
    outcome: str  # pass | fail | cannot judge
    reason: str
    missing: str | None = None  # what it could not judge for: measure | runs | test | interval | problem

    @property
    def tripped(self) -> bool:
        return self.outcome == FAIL

    def as_json(self) -> dict[str, Any]:
        return {"pair": self.pair, "direction": self.direction, "threshold": self.threshold,
                "measure": self.measure, "outcome": self.outcome, "tripped": self.tripped,
                "missing": self.missing, "reason": self.reason}  # fmt: skip


def exit_code(checks: list[Check]) -> int:
    """1 when a check failed, else 3 when one could not judge, else 0."""
    if any(c.outcome == FAIL for c in checks):
        return EXIT_FAIL
    if any(c.outcome == CANNOT_JUDGE for c in checks):
        return EXIT_CANNOT_JUDGE
    return EXIT_PASS


def _pct(x: float) -> str:
    return f"{x * 100:.3g} %"


def check(pair: str, m: Measure | None, direction: str, threshold: float, kind: str = "time") -> Check:
    """Whether B is significantly ``direction`` than A by more than ``threshold`` on measure ``m``, and why (not)."""

    def out(outcome: str, reason: str, missing: str | None = None) -> Check:
        return Check(pair, direction, threshold, m.name if m else kind, outcome, reason, missing)

    if m is None:
        return out(CANNOT_JUDGE, f"no {kind} is recorded on either side: record it, or gate on another --measure",
                   "measure")  # fmt: skip
    if m.slowdown is None:
        side = "A" if m.a.centre is None else "B"
        runs = m.a if side == "A" else m.b
        return out(CANNOT_JUDGE, f"side {side} has no {m.name} ({runs.ok} of {runs.runs} runs ok, none with the "
                                 "measure): record it, or gate on another --measure", "measure")  # fmt: skip
    d, s = m.difference, m.slowdown
    if d is None:
        return out(CANNOT_JUDGE, "one value a side, no test: run each side repeatedly", "runs")
    if not d.testable:
        return out(CANNOT_JUDGE, f"{d.describe()}: run each side at least 4 times, {MIN_INTERVAL_RUNS} for "
                                 "intervals", "runs")  # fmt: skip
    if d.disagree:
        return out(CANNOT_JUDGE, f"{d.describe()}: run more repetitions until they agree", "test")
    change = s if direction == "slower" else s.inverse()
    other = "faster" if direction == "slower" else "slower"
    if d.significant and change.value <= 1:
        return out(PASS, f"B is significantly {other}, not {direction}: {d.describe()}")
    bound = 1 + threshold
    text = f"B {sig(change.value, 3)}x {direction} at the {m.statistic}"
    if change.low is None or change.high is None:
        return out(CANNOT_JUDGE, f"{text}, {d.describe()}; but the ratio has no interval (fewer than "
                                 f"{MIN_INTERVAL_RUNS} runs a side) to hold against the {_pct(threshold)} "
                                 f"threshold: run each side {MIN_INTERVAL_RUNS} times or more", "runs")  # fmt: skip
    ci = f"95 % interval of the change {sig(change.low, 3)}-{sig(change.high, 3)}"
    if d.significant and change.low > bound:
        return out(FAIL, f"{text} ({ci}), beyond the {_pct(threshold)} threshold; {d.describe()}")
    if change.high < bound:
        return out(PASS, f"{text} ({ci}): within the {_pct(threshold)} threshold; {d.describe()}")
    return out(CANNOT_JUDGE, f"{text}, {d.describe()}; but the {ci} holds the {_pct(threshold)} threshold: "
                             "too imprecise to rule a change beyond it in or out; more repetitions narrow it",
               "runs")  # fmt: skip
