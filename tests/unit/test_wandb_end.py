"""A W&B run's exit record says 0 for a training that failed where ``wandb.finish()`` ran as the failure unwound (a
``finally`` block): the run is no success where its history stops short of the length its config plans."""

from __future__ import annotations

import pytest

from honestscale.collector.importers.wandb import _short
from honestscale.collector.importers.wandb._run import Run


def _run(config: dict[str, object], history: list[dict[str, object]], exit_code: int | None = 0) -> Run:
    return Run(config=config, history=list(enumerate(history)), exit_code=exit_code)


@pytest.mark.parametrize(
    ("config", "history", "short"),
    [
        ({"epochs": 2}, [{"epoch": 0}, {"epoch": 1}], False),  # a loop's epoch index, to the last
        ({"epochs": 2}, [{"epoch": 0}], True),  # failed in its first epoch of 2
        ({"num_train_epochs": 3, "max_steps": -1}, [{"train/epoch": 1.5}], True),  # the Trainer, half way
        ({"num_train_epochs": 3, "max_steps": -1}, [{"train/epoch": 3.0}], False),  # the epochs done, all
        (
            {"max_steps": 100, "num_train_epochs": 3},
            [{"trainer/global_step": 60, "epoch": 2}],
            True,
        ),  # steps rule
        ({"max_steps": 100}, [{"trainer/global_step": 100}], False),
        ({"max_epochs": "4"}, [{"epoch": 3}], False),  # a parameter kept as text
        ({"lr": 0.1}, [{"epoch": 0}], False),  # no planned length: the log cannot tell
        ({"epochs": 2}, [{"loss": 1.0}], False),  # nothing on its axis: cannot tell
    ],
)
def test_a_history_short_of_its_planned_length_is_no_success(
    config: dict[str, object], history: list[dict[str, object]], short: bool
) -> None:
    got = _short(_run(config, history), "trainer/global_step")
    assert (got is not None) == short, got
    if short:
        assert got is not None and "exit record says 0" in got and "finally" in got


def test_a_failure_the_exit_record_says_is_not_second_guessed() -> None:
    assert _short(_run({"epochs": 2}, [{"epoch": 0}], exit_code=1), None) is None
