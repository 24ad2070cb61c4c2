"""MSER-5's warm-up end on series whose answer is known by construction."""

from __future__ import annotations

import pytest

from honestscale.analysis.steady import mser5


@pytest.mark.parametrize("step_s", [0.0625, 0.1, 0.2, 0.37, 0.4, 0.5, 0.7, 1.1, 3.3])
@pytest.mark.parametrize("steps", [50, 60, 100])
def test_steps_of_exactly_one_length_after_a_warm_up_are_steady_from_its_end(
    step_s: float, steps: int
) -> None:
    """15 steps settling from 3x to 1x, then every step exactly ``step_s``: the warm-up ends at step 15. The errors
    of every cut past it are zero but for rounding (4e-34 at one, 0.0 at another): a tie, never "still settling
    past half the run" (which MSER-5 said at 50 steps for 7 of these 9 lengths)."""
    times = [step_s * (1 + 2 * (15 - i) / 15) if i < 15 else step_s for i in range(steps)]
    said = (
        "steady"
        if (steps - 15) // 5 >= 10
        else "steady (fewer than 10 batches after the warm-up: no trend test)"
    )
    assert mser5(times) == (15, said)


def test_a_series_still_settling_at_half_has_no_steady_state() -> None:
    times = [1.0 + (100 - i) / 100 for i in range(100)]  # falling steadily to the end
    warmup, why = mser5(times)
    assert warmup is None and "no steady state" in why


@pytest.mark.parametrize(("steps", "warm"), [(20_000, 200), (50_000, 100)])
def test_a_long_quiet_run_is_cut_where_its_warm_up_ends(steps: int, warm: int) -> None:
    """0.1 % noise and a warm-up only 1 % slower: the errors MSER-5 compares shrink as the run grows, so a tie's
    allowance must too (a fixed one cut a 100,000-step run at step 80 of its 100)."""
    import numpy as np

    times = list(0.1 * (1 + 0.001 * np.random.default_rng(1).standard_normal(steps)))
    times[:warm] = [t * 1.01 for t in times[:warm]]
    assert mser5(times)[0] == warm


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_step_time_that_is_not_finite_has_no_steady_state(bad: float) -> None:
    times = [0.1] * 30 + [bad] + [0.1] * 29
    assert mser5(times) == (None, "no steady state: a step time is not a finite number")
