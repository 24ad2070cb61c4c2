"""Campaign specs: checked before anything runs; a real grid with a tuning study on this machine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from honestscale.campaign import spec as _campaign
from honestscale.campaign.shared import runner_options
from tests.conftest import cli, hs, query
from tests.tools import module

SPEC = """
[campaign]
name = "t"
out = "runs"
repetitions = 1
scaling = "strong"

[args]
model = "mlp"
dataset = "digits"
epochs = 1
sample_interval = 0

[grid]
workers = [1, 2]

[tuning]
name = "lr"
workers = 1
grid = { lr = [0.5, 0.001] }
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("[grid]", "[grids]"), "unknown key 'grids' in [top level]"),
        (('model = "mlp"', 'modle = "mlp"'), "unknown runner option 'modle' in [args]"),
        (("repetitions = 1", "repetitions = 0"), "repetitions = 0"),
        (('scaling = "strong"', 'scaling = "strong"\nnodes = 2'), "unknown key 'nodes' in [campaign]"),
        (('scaling = "strong"', 'scaling = "mixed"'), "[campaign] scaling = 'mixed'"),
        (("epochs = 1", "epochs = 1\nseed = 3"), "[args] sets 'seed', which the campaign decides"),
        (("workers = [1, 2]", "workers = 2"), "[grid] workers must be a non-empty list"),
        (("workers = [1, 2]", "workers = [0, 2]"), "[grid] workers = [0, 2]: 0 is not a worker count"),
        (('name = "t"', "name = "), "not valid TOML"),
    ],
)
def test_bad_specs_are_refused_before_anything_runs(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = _spec(tmp_path, SPEC.replace(*change, 1))
    with pytest.raises(_campaign.SpecError) as info:
        _campaign.load(path, runner_options)
    assert message in str(info.value) and str(path) in str(info.value)
    result = hs("campaign", "run", path, "--store", tmp_path / "s.duckdb")
    assert result.returncode == 2 and "fix:" in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("option", "value"), [("model", "resnt50"), ("dataset", "digts")])
def test_a_misspelt_model_or_dataset_launches_nothing(tmp_path: Path, option: str, value: str) -> None:
    """Every point would start (on Slurm, an allocation each) and fail; the runner's names are checked first."""
    good = "mlp" if option == "model" else "digits"
    path = _spec(tmp_path, SPEC.replace(f'{option} = "{good}"', f'{option} = "{value}"', 1))
    result = hs("campaign", "run", path, "--store", tmp_path / "s.duckdb")
    assert result.returncode == 2, result.stderr
    assert (
        f"--{option} {value!r}: not one this runner offers ({good}, " in result.stderr
        and "fix:" in result.stderr
    )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "s.duckdb").exists()


def test_unknown_option_suggests_the_close_ones(tmp_path: Path) -> None:
    path = _spec(tmp_path, SPEC.replace("epochs = 1", "epoch = 1"))
    with pytest.raises(_campaign.SpecError, match="did you mean one of: epochs"):
        _campaign.load(path, runner_options)


def test_plans_expand_the_grid_with_stable_ids(tmp_path: Path) -> None:
    spec = _campaign.load(_spec(tmp_path, SPEC.replace("repetitions = 1", "repetitions = 3")), runner_options)
    tuning = _campaign.tuning_plans(spec)
    assert [re.sub("-[0-9a-f]{8}-", "-", p.run_id) for p in tuning] == [
        "t-tune-lr-lr=0.5-r0",
        "t-tune-lr-lr=0.001-r0",
    ]
    finals = _campaign.final_plans(spec, {"lr": 0.5}, "lr=0.5")
    assert [(p.workers, p.seed) for p in finals] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert all(p.args["lr"] == 0.5 and p.purpose == "final" and p.tuning_trial == "lr=0.5" for p in finals)
    argv = finals[0].runner_argv(Path("o"), "t", "strong")
    assert argv[argv.index("--lr") + 1] == "0.5" and "--purpose" in argv and "--scaling" in argv


def test_campaign_with_a_tuning_study_runs_and_ingests_every_trial(tmp_path: Path) -> None:
    module("torch")
    store = tmp_path / "s.duckdb"
    path = _spec(tmp_path, SPEC)
    result = hs("campaign", "run", path, "--store", store, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = query(store, "SELECT run_id, purpose, tuning_study, tuning_trial, world_size, learning_rate, status "
                        "FROM runs ORDER BY purpose DESC, run_id")  # fmt: skip
    trials = [r for r in rows if r[1] == "tuning"]
    finals = [r for r in rows if r[1] == "final"]
    assert sorted(r[3] for r in trials) == ["lr=0.001", "lr=0.5"] and all(r[2] == "lr" for r in trials)
    assert [r[4] for r in finals] == [1, 2] and all(r[6] == "success" for r in rows)
    # lr=0.5 learns digits in one epoch far better than lr=0.001: the study picks it for the final runs
    assert {r[5] for r in finals} == {0.5} and {r[3] for r in finals} == {"lr=0.5"}
    assert "scaling summary" in result.stdout
    summary = json.loads(cli("summary", "--store", store, "--campaign", "t", "-f", "json").stdout)
    assert [(s["workers"], s["runs"], s["succeeded"]) for s in summary] == [(1, 1, 1), (2, 1, 1)]
    assert summary[0]["comm"] == 0 and summary[1]["comm"] > 0
    again = hs("campaign", "run", path, "--store", store, timeout=600)
    assert again.returncode == 0
    assert query(store, "SELECT count(*) FROM runs") == [(4,)]  # finished runs are not run again
    # compared within the campaign, the runs are judged in its context: the study's trials (HS103) and the whole
    # plan (HS206) are seen though compare leaves the trials out of its sides; under strong scaling the local batch
    # and the backend follow from the worker count (HS214 names them so, not as confounds)
    got = cli("compare", "campaign=t,workers=1", "campaign=t,workers=2", "--store", store, "-f", "json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    (pair,) = doc["pairs"]
    assert doc["left_out"] == {"purpose tuning (context, not a result)": [r[0] for r in trials]}
    judged = {*pair["verdicts"]["fail"], *pair["verdicts"]["cannot_verify"]}
    assert not judged & {"HS103", "HS206", "HS214"}, pair["verdicts"]
    assert pair["confounds"] == [] and [d["field"] for d in pair["factor"]] == ["workers"]
    follows = {d["field"]: d["why"] for d in pair["follows_from_the_factor"]}
    assert {"backend", "local_batch_size"} <= set(follows) and "no collective backend" in follows["backend"]
    # the launcher gives 1 worker both threads and each of 2 workers one: that follows from the worker count too
    assert any("threads" in field for field in follows), follows
