"""MLPerf Training v6.0 logs (``../shared/data/mlperf-training-v6/``) against mlperf-logging 4.1.68 (which checks
rounds 6.0.0 and 6.1.0): what only they hold.

The two new mixture-of-experts benchmarks (``gpt_oss_20b``, ``deepseekv3_671b``) log a validation loss as
``eval_accuracy``, so their quality is judged lower is better, with the target of each round's compliance rule.
Every result file's time, status, batch, accelerators and quality, and every submission's score (a partial folder,
1 of 10 or 1 of 3 runs, has none and says why), against mlperf-logging's reading: ``test_mlperf_official.py``, over
every data set.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from honestscale import catalogue
from honestscale import view as _view
from honestscale.analysis.scaling import reached_at
from tests.conftest import cli
from tests.mlperf import compliance_target, data_root

NEW = ("gpt_oss_20b", "deepseekv3_671b")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("v6") / "s.duckdb"
    result = cli("ingest", data_root("mlperf-training-v6"), "--store", path)
    assert result.returncode == 0, result.stderr
    return path


def test_the_new_benchmarks_losses_are_judged_lower_is_better_with_the_rounds_targets(store: Path) -> None:
    """gpt_oss_20b's and deepseekv3_671b's losses: lower is better, with the v6.0 and v6.1 compliance rules' targets
    (none before v6.0), and each run reached its target at its last evaluation before run_stop; v6.1's new
    benchmarks (qwen35_397b_grpo, dlrmv4) have their targets, higher is better."""
    with duckdb.connect(str(store), read_only=True) as con:
        runs = [r for r in _view.build(con).runs if r.model in NEW]
    assert sorted(str(r.model) for r in runs) == sorted(NEW)
    for run in runs:
        info = run.attrs["mlperf"]
        for rnd in ("6.0", "6.1"):  # the v6.1 rules keep both benchmarks' targets
            rules = catalogue.mlperf(str(run.model), rnd)
            assert rules is not None and len(rules.metrics) == 1
            assert (rules.metrics[0].better, rules.metrics[0].target) == compliance_target(
                str(run.model), rnd
            )
        assert [t["better"] for t in info["targets"]] == ["lower"]
        assert catalogue.direction(run.final_metric, info) == "lower"
        # each successful run reached its target at its last evaluation before run_stop (it stopped because it did)
        before = [e.time for e in run.evals if run.stopped_at is not None and e.time <= run.stopped_at + 1e-6]
        assert run.ok and reached_at(run) == max(before), run.id
    v61 = {name: catalogue.mlperf(name, "6.1") for name in ("qwen35_397b_grpo", "dlrmv4")}
    got = {n: (b.metrics[0].better, b.metrics[0].target) for n, b in v61.items() if b}
    assert got == {"qwen35_397b_grpo": ("higher", 0.69), "dlrmv4": ("higher", 0.75)}
    assert catalogue.mlperf("gpt_oss_20b", "5.1") is None, "no target before the round that introduced it"
