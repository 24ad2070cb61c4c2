"""The shared loop's budget, the one place every runner (PyTorch's loop, MXNet on it, Keras's fit through its
callback) asks when to evaluate, when the sample budget is spent and what run_start says ends training."""

from __future__ import annotations

from argparse import Namespace

from honestscale.runners._loop import Budget


def test_a_runner_without_a_budget_option_has_none() -> None:
    """MXNet and Keras take no --max-time: read as None, never an AttributeError."""
    budget = Budget.of(Namespace(epochs=5, warmup_steps=2, eval_every=2, max_samples=None), target=None)
    assert (budget.max_time, budget.max_samples, budget.eval_every) == (None, None, 2)
    assert budget.criterion() == ("epochs", 5.0)


def test_the_first_criterion_given_is_what_run_start_says() -> None:
    args = Namespace(epochs=9, warmup_steps=0, eval_every=1, max_samples=4000, max_time=60.0)
    assert Budget.of(args, target=0.95).criterion() == ("target_accuracy", 0.95)
    assert Budget.of(args, target=None).criterion() == ("samples", 4000.0)
    assert Budget.of(Namespace(epochs=9, warmup_steps=0, max_time=60.0), None).criterion() == (
        "wall_time",
        60.0,
    )


def test_evaluations_every_n_epochs_after_the_last_and_always_toward_a_target() -> None:
    every3 = Budget(epochs=7, warmup_steps=0, eval_every=3)
    assert [e for e in range(7) if every3.evaluates(e, last=e == 6)] == [2, 5, 6]
    toward = Budget(epochs=7, warmup_steps=0, eval_every=3, target=0.9)
    assert all(toward.evaluates(e, last=False) for e in range(7))


def test_the_sample_budget_is_spent_at_its_count() -> None:
    budget = Budget(epochs=1, warmup_steps=0, max_samples=256)
    assert [budget.spent(n) for n in (0, 255, 256, 300)] == [False, False, True, True]
    assert not Budget(epochs=1, warmup_steps=0).spent(10**9)
