"""Versions of one framework are not two frameworks: "Frameworks compared" never sets one system's tf2.0 and tf2.1
submissions side by side as frameworks; it leaves them out and says why, and where other frameworks ran the setup
it compares one version of each."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from honestscale.view import build
from honestscale.view._comparisons import like_for_like
from honestscale.view._frameworks import framework_family, framework_version
from tests.conftest import cli


@pytest.mark.parametrize(
    ("name", "family", "version"),
    [("tf2.0", "tensorflow", "2.0"), ("tf2.1", "tensorflow", "2.1"), ("TensorFlow 2.8.0", "tensorflow", "2.8.0"),
     ("NGC MXNet 20.06 , NGC PyTorch 20.06", "ngc mxnet, ngc pytorch", "20.06"),
     ("PyTorch NVIDIA Release 24.04", "pytorch nvidia release", "24.04"), ("pytorch1.13", "pytorch", "1.13"),
     ("horovod-tf", "horovod-tf", None), ("torch", "torch", None), ("x86", "x86", None), (None, "?", None)],
)  # fmt: skip
def test_a_framework_name_without_its_version(name: str | None, family: str, version: str | None) -> None:
    """The names MLPerf system descriptions and honestscale's runners record (v0.7, v1.x, v4.0 and these runners)."""
    assert framework_family(name) == family and framework_version(name) == version


@pytest.fixture
def two_versions(mlperf: Path, tmp_path: Path) -> Path:
    """Google's v0.7 8xV100 resnet submission (tf2.0), and the same system's submission on tf2.1: its logs under a
    system description that differs only in the framework's version, as a second round's submission of it would."""
    tree = tmp_path / "Google"
    (tree / "systems").mkdir(parents=True)
    src = mlperf / "Google"
    for version in ("2.0", "2.1"):
        shutil.copytree(src / "results" / "gpu-v100-8-TF2.0", tree / "results" / f"gpu-v100-8-TF{version}")
        desc = json.loads((src / "systems" / "gpu-v100-8-TF2.0.json").read_text())
        assert desc["framework"] == "tf2.0"
        (tree / "systems" / f"gpu-v100-8-TF{version}.json").write_text(
            json.dumps(desc | {"framework": f"tf{version}"})
        )
    store = tmp_path / "s.duckdb"
    got = cli("ingest", tree, "--campaign", "held", "--store", store)
    assert got.returncode == 0, got.stderr
    return store


def test_one_systems_two_versions_are_not_compared_as_frameworks(two_versions: Path) -> None:
    model = json.loads(cli("report", "--store", two_versions, "-f", "json").stdout)
    (fw,) = [c for c in model["comparisons"] if c["kind"] == "framework"]
    assert fw["frameworks"] == [] and fw["orderings"] == []
    assert sorted((n["framework"], n["runs"]) for n in fw["not_comparable"]) == [
        ("tf2.0", "5"),
        ("tf2.1", "5"),
    ]
    for n in fw["not_comparable"]:
        assert (
            "tf2.0 and tf2.1 are versions of one framework (tensorflow), not two frameworks" in n["differs"]
        )
    # the rules judge no framework ordering either
    lint = json.loads(cli("lint", "--store", two_versions, "--select", "HS212", "-f", "json").stdout)
    assert not [f for f in lint if f["comparison"].startswith("framework:")]


def test_with_another_framework_one_version_of_each_is_compared(two_versions: Path) -> None:
    """tf2.0 and tf2.1 beside a second framework on the same setup (the same runs, named mxnet 1.6): tensorflow is
    compared once (the version with most runs, then the last named), the other version left out, and why."""
    with contextlib.closing(duckdb.connect(str(two_versions), read_only=True)) as con:
        runs = build(con, "held").runs
    other = [dataclasses.replace(r, run_id=r.run_id + "-mx", framework="mxnet 1.6") for r in runs
             if r.framework == "tf2.0"]  # fmt: skip
    compared, left_out = like_for_like(runs + other)
    assert sorted({r.framework or "?" for r in compared}) == ["mxnet 1.6", "tf2.1"]
    (out,) = left_out
    assert out["framework"] == "tf2.0" and out["runs"] == "5"
    assert out["differs"].startswith("another version of tensorflow (tf2.1 is compared)")
