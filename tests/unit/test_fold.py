"""Per-run reasons folded into one statement (lint._fold): each reason once, counted, its numbers as ranges."""

from __future__ import annotations

from honestscale.lint._fold import Reason, fold, number, span


def test_one_reason_of_many_runs_is_said_once_with_its_range() -> None:
    waited = "steps waited for a CPU {} % of their time"
    load = "host load {} on {} CPUs"
    reasons = {
        f"r{i}": [Reason(waited, (w,)), Reason(load, (h, 2))]
        for i, (w, h) in enumerate(
            [(84.2, 3.5), (99.0, 3.9), (91.0, 3.7), (88.0, 3.6), (95.5, 3.8), (90.0, 3.5)]
        )
    }
    assert (
        fold(reasons)
        == "6 of 6 runs: steps waited for a CPU 84.2–99 % of their time; host load 3.5–3.9 on 2 CPUs"
    )


def test_reasons_of_different_runs_are_counted_apart() -> None:
    reasons = {
        "a": [Reason("the allocation shared its nodes")],
        "b": [
            Reason("the allocation shared its nodes"),
            Reason("{} other process(es) on the accelerator", (3,)),
        ],
        "c": [],
    }
    assert fold(reasons) == (
        "2 of 3 runs: the allocation shared its nodes; 1 of 3 runs: 3 other process(es) on the accelerator"
    )
    assert fold({"a": [Reason("host load {} on {} CPUs", (3.94, 2))]}) == "the run: host load 3.94 on 2 CPUs"
    assert fold({"a": [Reason("x")]}, of=4) == "1 of 4 runs: x"


def test_numbers_keep_the_digits_that_carry_meaning() -> None:
    assert number(0.0005738765000131707) == "0.000574"
    assert number(12345.6) == "12,346"
    assert span([1.0004, 1.0001]) == "1"
    assert span([-3.0, 2.5]) == "-3–2.5"
