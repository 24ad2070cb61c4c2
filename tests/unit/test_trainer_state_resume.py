"""A resumed training's final ``trainer_state.json`` (Transformers 5) holds every launch's entries but the last
launch's ``train_runtime``, over which Transformers divides that launch's steps alone: the step it resumed at is
told, its earlier entries placed at the last launch's start, and the run says its time to train is that launch's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honestscale.collector.importers import hf
from tests.conformance.invariants import FIXTURES
from tests.conftest import REPO

RESUMED = FIXTURES / "trainer" / "tensorboard-killed-resumed" / "out" / "trainer" / "trainer_state.json"
WHOLE = REPO / "tests" / "data" / "imported" / "hf-gpt2" / "trainer_state.json"


def _summary(path: Path) -> tuple[float, float, int]:
    state = json.loads(path.read_text())
    (end,) = [e for e in state["log_history"] if "train_runtime" in e]
    return end["train_runtime"], end["train_steps_per_second"], state["global_step"]


@pytest.mark.parametrize(("path", "resumed"), [(RESUMED, 20), (WHOLE, None)])
def test_the_step_a_launch_resumed_at_is_told_from_the_tools_own_summary(
    path: Path, resumed: int | None
) -> None:
    assert hf._resumed_at(*_summary(path)) == resumed


@pytest.mark.parametrize(
    ("runtime", "steps_ps", "global_step", "resumed"),
    [
        (0.2719, 88.261, 44, 20),  # the matrix's cell: 24 of 44 steps in the last launch
        (100.0, 1.0, 100, None),  # every step in this launch
        (100.0, 0.995, 100, None),  # within the rounding: no resume
        (100.0, 0.5, 100, 50),
        (None, 1.0, 100, None),  # no runtime: cannot tell
    ],
)
def test_resumed_at_allows_for_the_summarys_rounding(
    runtime: float | None, steps_ps: float, global_step: int, resumed: int | None
) -> None:
    assert hf._resumed_at(runtime, steps_ps, global_step) == resumed


def test_a_resumed_state_says_its_time_is_the_last_launchs_and_places_nothing_before_its_start() -> None:
    got = hf.parse(RESUMED, RESUMED.read_text(), None)
    start = next(e for _, e in got.events if e["kind"] == "run_start")
    stop = next(e for _, e in got.events if e["kind"] == "run_stop")
    unknown = start["imported"]["unknown"]
    assert any("resumed from it" in u and "24 of its 44 steps" in u for u in unknown), unknown
    runtime, _, _ = _summary(RESUMED)
    assert stop["time"] - start["time"] == pytest.approx(runtime)
    evals = [e for _, e in got.events if e["kind"] == "eval"]
    assert evals and all(start["time"] <= e["time"] <= stop["time"] for e in evals)
    assert any("resumed at step 20" in n for n in got.notes), got.notes


def test_a_state_of_one_launch_says_nothing_of_a_resume() -> None:
    got = hf.parse(WHOLE, WHOLE.read_text(), None)
    start = next(e for _, e in got.events if e["kind"] == "run_start")
    assert not any("resumed" in u for u in start["imported"]["unknown"])
