"""The cross-framework campaign (examples/frameworks-campaign.toml) for real, one repetition per point: the same
model, data and global batch on torch, tensorflow, horovod-torch, horovod-tf and mxnet at 1 and 2 workers, then
the linter's framework comparisons and the report's "Frameworks compared" section.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cli, framework_python, hs, query
from tests.tools import require

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ["torch", "tensorflow", "horovod-torch", "horovod-tf", "mxnet"]


@pytest.fixture(scope="module")
def environments() -> None:
    for f in FRAMEWORKS:
        framework_python(f)


def test_one_spec_compares_every_framework(tmp_path: Path, store: Path, environments: None) -> None:
    text = (ROOT / "examples" / "frameworks-campaign.toml").read_text()
    text = re.sub(r"(?m)^repetitions = 6\b", "repetitions = 1", text)
    text = re.sub(r'(?m)^out = ".*"', f'out = "{tmp_path / "runs"}"', text)
    spec = tmp_path / "frameworks.toml"
    spec.write_text(text)
    result = hs("campaign", "run", spec, "--store", store, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = query(
        store,
        "SELECT framework, world_size, status, global_batch_size, model, dataset FROM runs ORDER BY 1, 2",
    )
    assert [(r[0], r[1]) for r in rows] == [(f, w) for f in sorted(FRAMEWORKS) for w in (1, 2)]
    assert {(r[2], r[3], r[4], r[5]) for r in rows} == {("success", 64, "mlp", "digits")}

    lint = cli("lint", "--store", store, "--campaign", "frameworks")
    # one framework comparison per worker count, each across the five frameworks
    assert re.search(r"comparisons: 10 config, 5 scaling, 2 framework, 1 campaign", lint.stdout), lint.stdout[
        -2000:
    ]
    # every framework ran on the same machine: each comparison holds all five, like for like (the view's), and no
    # hardware was compared, so HS104 has nothing to judge
    assert re.search(r"HS104 .* not_applicable ", lint.stdout)
    findings = json.loads(cli("lint", "--store", store, "--campaign", "frameworks", "-f", "json").stdout)
    assert not [f for f in findings if f["code"] in ("HS104", "HS108", "HS111") and f["outcome"] == "fail"]
    model = json.loads(cli("report", "--store", store, "--campaign", "frameworks", "-f", "json").stdout)
    compared = [c for c in model["comparisons"] if c["kind"] == "framework"]
    assert len(compared) == 2 and all(len(c["frameworks"]) == len(FRAMEWORKS) and not c["not_comparable"]
                                      for c in compared)  # fmt: skip

    pdf = tmp_path / "frameworks.pdf"
    made = cli("report", "--store", store, "--campaign", "frameworks", "-o", pdf)
    assert made.returncode == 0, made.stderr[-3000:]
    require(shutil.which("pdftotext"), "poppler-utils (pdftotext)", "apt-get install poppler-utils")
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    section = text[text.index("Frameworks compared\n\nFrameworks are compared only on the same model") :]
    for f in FRAMEWORKS:
        assert f.replace("tensorflow", "tensorﬂow") in section or f in section
    assert "not exposed" in section  # TensorFlow's all-reduce is not separable: said, not drawn as zero
    assert "Not comparable" not in section  # same model, data, batch, precision and machine: all compared
    csvs = sorted((tmp_path / "frameworks_files").glob("frameworks*-*.csv"))  # times and breakdown, per count
    assert len(csvs) == 4 and all(len(c.read_text().splitlines()) == 1 + len(FRAMEWORKS) for c in csvs)
