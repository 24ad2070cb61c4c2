"""`probe`'s plan, without training: the request and its Slurm options as two typed bundles, checked and written
as a campaign spec (the system tier trains it: tests/system/test_advise.py, test_slurm.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from honestscale.campaign.probe import Probe, SlurmOptions, prepare
from honestscale.errors import HonestscaleError
from tests.conftest import REPO
from tests.tools import module

MODEL = f"{REPO / 'examples' / 'byo' / 'mycnn.py'}:build"


def test_slurm_options_given_without_slurm_are_refused_by_name() -> None:
    with pytest.raises(HonestscaleError) as refused:
        SlurmOptions(partition="gpu", gpus_per_task=1).table()
    assert refused.value.message == "--partition, --gpus-per-task only apply to Slurm"
    assert SlurmOptions(cpus_per_task=8, exclusive=False).table() == {}  # defaults say nothing


def test_slurm_options_make_the_spec_table_the_sbatch_script_reads() -> None:
    table = SlurmOptions(
        on_slurm=True, partition="gpu", account="proj", gpus_per_task=1, cpus_per_task=8
    ).table()
    assert table == {
        "partition": "gpu",
        "time": "00:30:00",
        "cpus_per_task": 8,
        "account": "proj",
        "gpus_per_task": 1,
        "sbatch": ["--exclusive"],
    }
    assert "sbatch" not in SlurmOptions(on_slurm=True, partition="gpu", exclusive=False).table()


@pytest.mark.parametrize(
    ("workers", "said"), [("1,x", "give whole numbers"), ("0,2", "at least 1"), (",", "at least 1")]
)
def test_bad_worker_counts_are_refused_before_anything_is_written(
    tmp_path: Path, workers: str, said: str
) -> None:
    with pytest.raises(HonestscaleError) as refused:
        prepare(Probe(model=MODEL, workers=workers, out_dir=tmp_path / "p"), SlurmOptions(), print)
    assert said in str(refused.value.fix) and not (tmp_path / "p").exists()


def test_the_spec_trains_a_fixed_sample_budget_on_staged_digits(tmp_path: Path) -> None:
    module("torch")
    said: list[str] = []
    request = Probe(model=MODEL, workers="2,1", framework="torch", samples=4000, out_dir=tmp_path / "p")
    spec, campaign = prepare(request, SlurmOptions(), said.append)
    assert campaign == "probe-mycnn-build" and spec == tmp_path / "p" / "probe-mycnn-build.toml"
    doc = tomllib.loads(spec.read_text())
    assert doc["grid"] == {"framework": ["torch"], "workers": [1, 2]}
    args = doc["args"]
    assert (
        args["dataset"] == "memmap" and Path(args["data_path"]).is_dir()
    )  # digits read from files: I/O probed
    assert args["max_samples"] == 4000 and args["model"] == MODEL and "slurm" not in doc
    assert said == [
        f"probe {campaign}: 1 framework(s) x 2 worker count(s) x 2 run(s) of 4,000 samples; spec {spec}"
    ]
