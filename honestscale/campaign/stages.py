"""A campaign's stages, once for every way of running it: the tuning study's trials, its best trial, the finals.

Running locally executes each stage in turn; submitting to Slurm submits the first stage with runs not
yet submitted. Both read the stages from :func:`stages`, and the best trial from :func:`best_trial`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from honestscale.campaign.spec import RunPlan, Spec, final_plans, points, slug, tuning_plans
from honestscale.errors import HonestscaleError
from honestscale.store import Connection, queries


@dataclass(frozen=True)
class Stage:
    name: str  # "tuning trials" | "final runs"
    label: str  # for progress: "tuning lr-sweep", "final runs"
    plans: list[RunPlan]


@dataclass(frozen=True)
class Best:
    """The tuning study's best trial: its grid values, name, mean final validation accuracy and run count."""

    point: dict[str, object]
    trial: str
    validation_accuracy: float
    runs: int


def best_trial(con: Connection, spec: Spec) -> Best:
    """The trial of the spec's tuning study with the best mean final validation accuracy."""
    assert spec.tuning is not None
    trials = queries.tuning_trials(con, spec.name, str(spec.tuning["name"]))
    best = trials.filter(trials["validation_accuracy"].is_not_null())
    if best.height == 0:
        raise HonestscaleError(f"tuning study {spec.tuning['name']!r}: no trial has a validation accuracy",
                               "look at the trials' logs in " + str(spec.out))  # fmt: skip
    trial = str(best["trial"][0])
    point = next(p for p in points(spec.tuning["grid"]) if slug(p) == trial)
    return Best(dict(point), trial, float(best["validation_accuracy"][0]), int(best["runs"][0]))


def stages(spec: Spec, best: Callable[[], Best]) -> Iterator[Stage]:
    """The spec's stages in order: the tuning trials (when it has a study), then the final runs with the best
    trial's values. ``best`` is called only once the tuning stage has been taken (run or submitted)."""
    tuned: dict[str, object] = {}
    trial = None
    if spec.tuning is not None:
        yield Stage("tuning trials", f"tuning {spec.tuning['name']}", tuning_plans(spec))
        chosen = best()
        tuned, trial = chosen.point, chosen.trial
    yield Stage("final runs", "final runs", final_plans(spec, tuned, trial))
