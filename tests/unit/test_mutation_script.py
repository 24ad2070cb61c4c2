"""scripts/mutation's bookkeeping: which package a mutant counts for, what its exit code means, the docs' list."""

from __future__ import annotations

import runpy
from typing import Any

from tests.conftest import REPO

SCRIPT: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "mutation"), run_name="mutation")
PATHS = [
    "honestscale/analysis",
    "honestscale/lint/rules",
    "honestscale/compare",
    "honestscale/claims/_judge.py",
]


def test_each_mutant_counts_for_the_path_it_lies_in() -> None:
    package = SCRIPT["_package"]
    assert package("honestscale.analysis.stats.x_median_ci__mutmut_3", PATHS) == "honestscale/analysis"
    assert package("honestscale.lint.rules.hs209_superlinear_speedup.xǁSuperlinearSpeedupǁcheck__mutmut_1",
                   PATHS) == "honestscale/lint/rules"  # fmt: skip
    assert package("honestscale.claims._judge.x_bound__mutmut_19", PATHS) == "honestscale/claims/_judge.py"
    assert package("honestscale.compare._pairs.x__setups__mutmut_4", PATHS) == "honestscale/compare"


def test_exit_codes_read_as_mutmut_reads_them() -> None:
    status = SCRIPT["_status"]
    assert [status(c) for c in (1, 3, 0, 33, 34, 36, -24, 37, 99)] == [
        "killed", "killed", "survived", "no tests", "skipped", "timeout", "timeout", "killed", "suspicious"]  # fmt: skip


def test_a_samples_share_carries_its_clopper_pearson_interval() -> None:
    low, high = SCRIPT["_interval"](8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4439, 0.9748)  # the exact binomial interval of 8 of 10


def test_the_docs_list_every_survivor_and_whether_it_is_explained() -> None:
    figure = SCRIPT["Figure"]("mutation", "mutants killed, honestscale/analysis", 50.0, "%", 0.0, "higher", ">= 85",
                              "1 of 2 killed")  # fmt: skip
    text = SCRIPT["_doc"]({"honestscale/analysis": ["a.x_f__mutmut_1", "a.x_g__mutmut_2"]},
                          {"a.x_g__mutmut_2": "equivalent: the bound is never reached"}, [figure])  # fmt: skip
    assert text.startswith(SCRIPT["BEGIN"]) and text.endswith(SCRIPT["END"])
    assert "- `a.x_f__mutmut_1`: not explained: a test to write" in text
    assert "- `a.x_g__mutmut_2`: equivalent: the bound is never reached" in text
    assert "`honestscale/analysis`: 50.0 % killed (1 of 2 killed)" in text
