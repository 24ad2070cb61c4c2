"""Repetitions until the interval is narrow (SC15 rule 5): ``campaign run --until-ci`` and the spec's until_ci."""

from __future__ import annotations

import math
import re
from pathlib import Path
from statistics import median

import pytest

from honestscale.campaign import repeat
from honestscale.campaign.spec import Spec, SpecError, load
from honestscale.collector import Ingester, discover
from honestscale.store import open_store
from tests.conftest import cli, hs
from tests.lint_campaigns import T0, write_run

OPTIONS = {"model", "dataset", "epochs", "target_accuracy", "batch_size", "lr"}
SPEC = """
[campaign]
name = "u"
repetitions = {reps}
{extra}
[args]
model = "mlp"
dataset = "digits"
[grid]
workers = [1]
"""


def _spec(tmp: Path, reps: int = 1, extra: str = 'until_ci = "3%"\nmax_repetitions = 30') -> Spec:
    path = tmp / "spec.toml"
    path.write_text(SPEC.format(reps=reps, extra=extra))
    return load(path, lambda _: OPTIONS)


def _first_narrow(times: list[float], bound: float) -> int | None:
    """Independently of honestscale: the first n whose 95 % order-statistic interval of the median (the widest
    symmetric pair of order statistics covering the median with probability >= 95 %, from binomial sums) lies
    within ``bound`` of the median."""
    for n in range(1, len(times) + 1):
        xs = sorted(times[:n])
        ks = [
            k
            for k in range(1, n // 2 + 1)
            if sum(math.comb(n, i) for i in range(k, n - k + 1)) / 2**n >= 0.95
        ]
        if not ks:
            continue
        k = max(ks)
        m = median(xs)
        if max(m - xs[k - 1], xs[n - k] - m) / m <= bound:
            return n
    return None


def test_spec_keys_and_their_errors(tmp_path: Path) -> None:
    s = _spec(tmp_path)
    assert s.until_ci == pytest.approx(0.03) and s.max_repetitions == 30
    assert _spec(tmp_path, extra="until_ci = 0.05").until_ci == pytest.approx(0.05)
    assert _spec(tmp_path, extra="").until_ci is None
    with pytest.raises(SpecError, match=r"until_ci = '5 percent' is not a fraction"):
        _spec(tmp_path, extra='until_ci = "5 percent"')
    with pytest.raises(SpecError, match=r"(?s)max_repetitions = 2.*>= repetitions \(6\)"):
        _spec(tmp_path, reps=6, extra='until_ci = "5%"\nmax_repetitions = 2')


def _drive(tmp_path: Path, spec: Spec, times: list[float]) -> int:
    """Run the campaign's rounds by hand: write and ingest each run next_round asks for, with the next time."""
    out = tmp_path / "events"
    finals = [p for p in spec.plans() if p.purpose == "final"]
    con = open_store(tmp_path / "s.duckdb")
    try:
        plans = finals
        n = 0
        while plans:
            (plan,) = plans
            assert plan.run_id == f"{finals[0].series}-r{n}" and plan.seed == spec.seed + n
            write_run(out, plan.run_id, {"campaign": "u", "ttt": times[n]}, n, T0 + 10_000 * n)
            Ingester(con).ingest(discover([str(out / plan.run_id)]).sources)
            n += 1
            plans = repeat.next_round(con, spec, finals)
        return n
    finally:
        con.close()


def test_rounds_stop_at_the_first_count_whose_interval_meets_the_bound(tmp_path: Path) -> None:
    times = [100.0, 104.0, 97.0, 103.0, 99.0, 110.0, 101.0, 98.5, 100.5, 102.0, 99.5, 101.5, 100.2, 99.8] * 2
    expected = _first_narrow([0.99 * t for t in times], 0.03)  # time to accuracy: the eval at 0.99 of the run
    assert expected is not None and expected > 6  # the first interval (n = 6) is too wide: rounds were needed
    assert _drive(tmp_path, _spec(tmp_path), times) == expected


def test_rounds_stop_at_the_cap_when_the_interval_stays_wide(tmp_path: Path) -> None:
    times = [100.0, 160.0, 70.0, 140.0, 90.0, 180.0, 60.0, 150.0, 80.0, 170.0]
    assert _first_narrow(times, 0.03) is None
    spec = _spec(tmp_path, extra='until_ci = "3%"\nmax_repetitions = 8')
    assert _drive(tmp_path, spec, times) == 8
    con = open_store(tmp_path / "s.duckdb")
    try:
        (got,) = repeat.precisions(con, spec, [p for p in spec.plans() if p.purpose == "final"]).values()
    finally:
        con.close()
    assert got.capped and not got.met and got.runs == 8
    assert got.describe().startswith("8 runs, stopped by the cap of 8: interval reaches ±")


def test_campaign_run_until_ci_on_this_machine(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.format(reps=1, extra='out = "runs"').replace(
            'dataset = "digits"', 'dataset = "digits"\nepochs = 2'
        )
    )
    store = tmp_path / "s.duckdb"
    got = hs(
        "campaign",
        "run",
        spec,
        "--store",
        store,
        "--until-ci",
        "0.01%",
        "--max-repetitions",
        "2",
        timeout=600,
    )
    assert got.returncode == 0, got.stderr
    assert "u workers=1: 2 runs, stopped by the cap of 2: no 95 % interval yet" in got.stderr
    assert "more repetitions, round 1" in got.stderr or re.search(
        r"\[2/2\] u-workers=1-[0-9a-f]{8}-r1", got.stderr
    )
    ids = [r["run_id"] for r in __import__("json").loads(cli("runs", "--store", store, "-f", "json").stdout)]
    assert sorted(re.sub("-[0-9a-f]{8}-", "-", i) for i in ids) == ["u-workers=1-r0", "u-workers=1-r1"]
    bad = hs("campaign", "run", spec, "--store", store, "--until-ci", "5 percent")
    assert bad.returncode == 2 and "--until-ci = '5 percent' is not a fraction of the median" in bad.stderr
