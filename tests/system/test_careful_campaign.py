"""The linter on a campaign trained for real by honestscale's runners: everything recorded, so on a quiet host no
rule fails or says it cannot verify; on a busy one only the five rules that watch the host (HS208-HS212) may fail,
each naming the load or the stalls, and HS205 may only say it cannot verify the warm-up, naming the load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import cli, hs, query
from tests.tools import module


def test_a_careful_campaign_from_the_runners_passes_every_rule(tmp_path: Path) -> None:
    """Everything recorded (real data read from disk, test split, tuning trials, one config per point, a fixed
    target, 6 repetitions, the plan): no rule fails or says it cannot verify but those that watch a busy host
    (HS208 shared node, HS209-HS212: stalls and what they cause), each naming the load, and HS205's cannot-verify
    when the load leaves no steady state; lint exits 1 only for HS209's error (a superlinear point, do not quote)."""
    module("torch")
    from honestscale.runners._torch_data import digits

    data = tmp_path / "digits"
    data.mkdir()
    splits = digits()
    for name in ("train", "validation", "test"):
        ds = getattr(splits, name)
        np.save(data / f"{name}_x.npy", ds.tensors[0].numpy())
        np.save(data / f"{name}_y.npy", ds.tensors[1].numpy())
    spec = tmp_path / "careful.toml"
    spec.write_text(f"""
[campaign]
name = "careful"
out = "runs"
repetitions = 6
scaling = "strong"

[args]
model = "mlp"
dataset = "memmap"
data_path = "{data}"
batch_size = 64
epochs = 60
target_accuracy = 0.93
sample_interval = 0
# careful: millisecond steps settle over their first 20-30 (caches, the allocator, the CPU's clock), as MSER-5 finds
# in the step times (HS205 failed a run marking 3: "found 25"; under CI's load one marking 30: "found 40", 8 % above
# the mean after it); a careful campaign marks that much, and more
warmup_steps = 50

[grid]
workers = [1, 2]

[tuning]
name = "lr"
workers = 1
grid = {{ lr = [0.2, 0.05] }}
args = {{ target_accuracy = false, epochs = 5 }}
""")
    store = tmp_path / "s.duckdb"
    run = hs("campaign", "run", spec, "--store", store, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert query(store, "SELECT count(*) FROM runs WHERE purpose = 'final' AND status = 'success'") == [(12,)]
    result = cli("lint", "--store", store, "--campaign", "careful", "-f", "json")
    assert result.returncode in (0, 1), result.stderr
    findings = json.loads(result.stdout)
    # On a quiet host nothing fails. On a loaded one (a shared CI machine) the runs stall, and the rules that
    # watch for it must say so rather than pass: stalls filling the time to train (HS210), and what they cause,
    # a superlinear-looking speedup (HS209), time and throughput disagreeing (HS211) or two worker counts the
    # stalls make indistinguishable (HS212), each with the stalls or the busy host named; never any other rule. A superlinear point
    # whose cause the data names (the stalls; the launcher's threads per worker, 2 -> 1) is an error, "do not
    # quote", and lint exits 1 for it and for nothing else.
    # A host that turns busy midway leaves step times with no steady state: HS205 says it cannot verify the
    # warm-up then (never that it fails). A host busy at the start of a run, quiet after, makes its first steps
    # slow as a warm-up would: the steps record the host's contention (contract 5: CPU pressure, steal), and HS205
    # names that load instead of calling it a warm-up; where the pressure the steps sampled explains less than half,
    # a host busy at the run's start (HS208's load) still keeps HS205 from calling it one (seen in a loaded run).
    # A load none of that caught slows one repetition's steps after the marked warm-up and not the others': a
    # warm-up repeats in every run, so HS205 cannot verify it (seen in CI: one 1-worker repetition, with no load named).
    noisy = {"HS208", "HS209", "HS210", "HS211", "HS212"}
    unsteady = [f for f in findings if f["code"] == "HS205"]
    assert all(
        f["outcome"] == "cannot_verify"
        and any(
            said in f["message"]
            for said in (
                "no steady state",
                "someone's load, not a warm-up",
                "busy as the run started",
                "a warm-up repeats in every run",
            )
        )
        for f in unsteady
    ), "\n".join(f"{f['outcome']}: {f['message']}" for f in unsteady)
    assert {f["code"] for f in findings} - {"HS205"} <= noisy, "\n".join(
        f"{f['code']} {f['outcome']}: {f['message']}" for f in findings
    )
    errors = [f for f in findings if f["severity"] == "error"]
    assert all(f["code"] == "HS209" for f in errors), errors
    assert result.returncode == (1 if errors else 0), result.stderr
    # What the load did must be named beside it: stalls (HS210), or a host busy throughout (HS208: a uniform
    # load slows every step alike, so no step stands out as a stall, yet it blurs the comparison HS212 tests).
    if {"HS209", "HS211", "HS212"} & {f["code"] for f in findings}:
        assert {"HS208", "HS210"} & {f["code"] for f in findings}, findings
    assert "2 tuning" not in cli("lint", "--store", store).stdout  # sanity: the text form also runs
