"""The CI gate: ``--fail-if-slower 5%`` trips only on a change that is significant (SC15 rule 7) and whose 95 %
interval lies beyond the threshold; otherwise it says why not (too few runs to tell, no significant difference,
the interval holds the threshold)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from honestscale.analysis.points import sig
from honestscale.analysis.stats import SIGNIFICANCE
from honestscale.compare._measures import Measure
from honestscale.errors import HonestscaleError


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
    tripped: bool
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"pair": self.pair, "direction": self.direction, "threshold": self.threshold,
                "measure": self.measure, "tripped": self.tripped, "reason": self.reason}  # fmt: skip


def _pct(x: float) -> str:
    return f"{x * 100:.3g} %"


def check(pair: str, m: Measure | None, direction: str, threshold: float) -> Check:
    """Whether B is significantly ``direction`` than A by more than ``threshold`` on measure ``m``, and why (not)."""

    def out(tripped: bool, reason: str) -> Check:
        return Check(pair, direction, threshold, m.name if m else "?", tripped, reason)

    if m is None or m.slowdown is None:
        return out(False, "cannot tell: the measure is missing on a side")
    d, s = m.difference, m.slowdown
    if d is None:
        return out(False, "cannot tell: one value a side, no test")
    if not d.testable:
        smallest = 2 / math.comb(d.n_a + d.n_b, d.n_a)
        return out(False, f"too few runs to tell (n = {d.n_a} and {d.n_b}: Mann-Whitney's smallest p is "
                          f"{smallest:.2g}, not below {SIGNIFICANCE}, and a side has too few runs for a 95 % interval)")  # fmt: skip
    if not d.significant:
        return out(False, d.describe())
    change = s if direction == "slower" else s.inverse()
    if change.value <= 1:
        return out(
            False, f"significant, but B is {'faster' if direction == 'slower' else 'slower'}, not {direction}"
        )
    bound = 1 + threshold
    text = f"B {sig(change.value, 3)}x {direction}"
    if change.low is None or change.high is None:
        return out(False, f"{text}, significant, but no interval of the ratio (one run on a side)")
    ci = f"95 % interval {sig(change.low, 3)}-{sig(change.high, 3)}"
    if change.low > bound:
        return out(True, f"{text} ({ci}), beyond the {_pct(threshold)} threshold; {d.describe()}")
    if change.high < bound:
        return out(False, f"{text} ({ci}): significant, but less than the {_pct(threshold)} threshold")
    return out(False, f"{text}: significant, but the {ci} holds the {_pct(threshold)} threshold")
