"""claims/_judge.py's verdict on a point against its base case, on numbers whose answer is known: each branch of the
decision (by nature one number, no interval, an interval above, below or holding 1)."""

from __future__ import annotations

import pytest

from honestscale.claims import _judge
from honestscale.claims._file import Claim
from honestscale.claims._numbers import Number


def _claim(relation: str) -> Claim:
    return Claim("c1", "2 workers are faster", "speedup", "campaign=c", relation, 3, at=(("workers", "2"),))


def _speedup(
    value: float, low: float | None = None, high: float | None = None, nature: str | None = None
) -> Number:
    return Number(
        "speedup at 2 workers", value, low, high, 6, "median of runs", "x", ("a", "b"), by_nature=nature
    )


@pytest.mark.parametrize(
    ("relation", "number", "verdict", "says"),
    [
        ("faster", _speedup(1.3, nature="an MLPerf score"), _judge.SUPPORTED, "faster than the base case"),
        ("slower", _speedup(1.3, nature="an MLPerf score"), _judge.CONTRADICTED, "faster than the base case"),
        ("faster", _speedup(0.8, nature="an MLPerf score"), _judge.CONTRADICTED, "slower than the base case"),
        ("faster", _speedup(1.3), _judge.CANNOT_VERIFY, "with no interval from 6 run(s)"),
        (
            "faster",
            _speedup(1.3, 1.1, 1.5),
            _judge.SUPPORTED,
            "1.3, 95 % interval [1.1, 1.5] above 1: faster than the base case",
        ),
        ("slower", _speedup(1.3, 1.1, 1.5), _judge.CONTRADICTED, "above 1: faster"),
        ("slower", _speedup(0.8, 0.7, 0.9), _judge.SUPPORTED, "below 1: slower than the base case"),
        ("faster", _speedup(1.05, 0.95, 1.2), _judge.CONTRADICTED, "holds 1: no significant difference"),
    ],
)
def test_a_point_is_ordered_against_its_base_case_by_its_speedup(
    relation: str, number: Number, verdict: str, says: str
) -> None:
    got, text = _judge._ordered_point(_claim(relation), number)
    assert got == verdict and says in text, text
