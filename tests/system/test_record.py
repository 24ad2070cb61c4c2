"""honestscale.record: the public recorder a user's own loop calls, judged like the runners' runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from honestscale.cli import app
from honestscale.events import read_events
from honestscale.record import Recorder, RecordError, discover, pressure, start
from tests.conftest import REPO
from tests.tools import module, require

TORCHRUN = Path(sys.executable).with_name("torchrun")


def _events(path: Path) -> list[dict[str, Any]]:
    return [e for _, e in read_events(path) if isinstance(e, dict)]


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


class LaggedClock:
    """A device clock in miniature: a mark can be read only once a later mark was taken (as CUDA events are read
    a step later); reading one too early fails the test."""

    lagged = True

    def __init__(self) -> None:
        self.t = 0.0
        self.taken = 0
        self.synchronised = False  # at the end of training the recorder waits for the device: any mark reads

    def now(self) -> Any:
        self.t += 1.0
        self.taken += 1
        return (self.t, self.taken)

    def seconds(self, start: Any, end: Any) -> float:
        assert self.synchronised or end[1] < self.taken, "a device mark read before a later one was taken"
        return float(end[0] - start[0])


def test_a_step_records_the_phases_it_timed_and_leaves_the_others_unknown(tmp_path: Path) -> None:
    rec = start(out=tmp_path, framework="torch", model="mlp", dataset="digits", global_batch=8, warmup_steps=1,
                sample_interval=0, handle_signals=False)  # fmt: skip
    with rec.step(samples=8) as s:
        with s.phase("data"):
            pass
        with s.phase("compute"):
            pass
    with rec.step(tokens=80) as s:
        s.samples = 8  # known once the batch is
        for _ in range(2):  # two micro-batches: the phase adds up
            with s.phase("compute"):
                pass
        with s.phase("comm"):
            pass
    rec.epoch(train_loss=0.5)
    rec.eval("validation", "accuracy", 0.9, samples=10)
    rec.stop()
    events = _events(Path(rec.path))
    assert [e["kind"] for e in events] == ["run_start", "step", "step", "epoch", "eval", "run_stop"]
    start_ev, first, second, epoch, evaluation, stop = events
    assert (
        start_ev["framework"] == "torch"
        and start_ev["world_size"] == 1
        and start_ev["global_batch_size"] == 8
    )
    assert start_ev["local_batch_size"] == 8 and start_ev["launcher"] == "local" and start_ev["config_hash"]
    assert {"t_data", "t_compute"} <= first.keys() and not {"t_comm", "t_optimizer"} & first.keys()
    assert (
        first["comm_measured"] is False and first["warmup"] is True and first["t_total"] >= first["t_compute"]
    )
    assert (
        {"t_compute", "t_comm"} <= second.keys()
        and "t_data" not in second
        and second["comm_measured"] is True
    )
    assert second["tokens"] == 80 and second["warmup"] is False and second["step"] == 1
    assert epoch["epoch"] == 0 and epoch["samples"] == 16 and epoch["t_total"] > 0
    assert evaluation["epoch"] == 0, "an evaluation after rec.epoch() belongs to the epoch that ended"
    assert stop["status"] == "success"


def test_a_step_records_how_long_the_host_had_more_work_than_cpus(tmp_path: Path) -> None:
    """Contract 5: a step that shares the host with more busy processes than CPUs records that wait (PSI), so a
    slowdown from someone else's load is told from a warm-up; a run with the host to itself records it too."""
    require(Path("/proc/pressure/cpu").exists(), "Linux's pressure stall information (/proc/pressure/cpu)",
            "a Linux kernel 4.20+ with PSI on (psi=1 on its command line)")  # fmt: skip
    rec = start(out=tmp_path, framework="torch", global_batch=1, sample_interval=0, handle_signals=False)
    spin = "import time\nprint('spinning', flush=True)\nt = time.perf_counter()\nwhile time.perf_counter() - t < 30: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
            for _ in range((os.cpu_count() or 1) + 1)]  # fmt: skip
    try:
        assert all(
            h.stdout and h.stdout.readline() == "spinning\n" for h in hogs
        )  # every one busy before the step
        with rec.step(samples=1) as s, s.phase("compute"):
            busy(0.5)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    rec.stop()
    (step,) = [e for e in _events(Path(rec.path)) if e["kind"] == "step"]
    # one more busy process than CPUs: someone waits for a CPU nearly all the step long (never longer than it)
    assert 0.5 * step["t_total"] < step["cpu_pressure"] <= step["t_total"] * 1.05, step
    assert step["cpu_steal"] >= 0, (
        "the hypervisor's steal is counted where /proc/stat has it (0 on bare metal)"
    )


def busy(seconds: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


def test_a_device_clock_writes_each_step_once_its_marks_can_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        pressure, "RATE", 0.0
    )  # a reading at every boundary: only the device's lag holds a step
    clock = LaggedClock()
    with Recorder(tmp_path, "lagged", discover({}), sample_interval=0, clock=clock) as rec:
        rec.run_start(framework="torch", world_size=1)
        for i in range(3):
            with rec.step(samples=4) as s, s.phase("compute"):
                pass
            steps = [e for e in _events(Path(rec.path)) if e["kind"] == "step"]
            assert len(steps) == rec.steps == i, "a step is written once a later mark was taken"
        clock.synchronised = True
    steps = [e for e in _events(Path(rec.path)) if e["kind"] == "step"]
    assert [e["step"] for e in steps] == [0, 1, 2] and all(e["t_total"] == 3.0 for e in steps)
    assert all(e["t_compute"] == 1.0 for e in steps)


def test_what_cannot_be_recorded_is_refused_with_the_fix(tmp_path: Path) -> None:
    rec = start(out=tmp_path, run_id="mine", framework="torch", sample_interval=0, handle_signals=False)
    s = rec.step(samples=1)
    with (
        pytest.raises(RecordError, match="phases of a step do not nest"),
        s,
        s.phase("compute"),
        s.phase("comm"),
    ):
        pass
    s = rec.step(samples=1)
    with (
        pytest.raises(RecordError, match="'io' is not one of data, compute, comm, optimizer"),
        s,
        s.phase("io"),
    ):
        pass
    with pytest.raises(RecordError, match=r"samples=N"), rec.step():
        pass
    s = rec.step(samples=1).open()
    s.close()
    with pytest.raises(RecordError, match="a step ended twice"):
        s.close()
    rec.stop()
    with pytest.raises(RecordError, match="step after run_stop"):
        rec.step(samples=1)
    assert [e["kind"] for e in _events(Path(rec.path))] == ["run_start", "step", "run_stop"], (
        "no half step written"
    )
    with pytest.raises(RecordError, match=r"events-rank0.jsonl exists: run id 'mine' was recorded already"):
        start(out=tmp_path, run_id="mine", framework="torch", sample_interval=0, handle_signals=False)
    with pytest.raises(RecordError, match=r"start\(global_batch='64'\): the global batch is an integer"):
        start(out=tmp_path, run_id="bad", framework="torch", global_batch="64", sample_interval=0)  # type: ignore[arg-type]
    with pytest.raises(RecordError, match="train_size"):  # a contract field, checked by the contract
        start(out=tmp_path, run_id="bad", framework="torch", train_size="all", sample_interval=0)
    assert not (tmp_path / "bad" / "events-rank0.jsonl").exists(), "a refused start leaves no file"
    for key, fix in (
        ("world_size", "pass world="),
        ("global_batch_size", "pass global_batch="),
        ("config_hash", "computed"),
    ):
        with pytest.raises(
            RecordError, match=f"start\\({key}=...\\): {key} is not given as a field: .*{fix}"
        ):
            start(out=tmp_path, run_id="bad", framework="torch", sample_interval=0, **{key: cast(Any, 4)})


def test_the_configuration_hash_follows_what_defines_the_run(tmp_path: Path) -> None:
    def hashed(**kw: Any) -> str:
        rec = start(out=tmp_path, framework="torch", sample_interval=0, handle_signals=False, **kw)
        rec.stop()
        return str(_events(Path(rec.path))[0]["config_hash"])

    base = hashed(model="mlp", global_batch=64, precision="fp32", seed=1)
    assert base == hashed(model="mlp", global_batch=64, precision="fp32", seed=2), (
        "the seed is not the configuration"
    )
    assert base != hashed(model="mlp", global_batch=128, precision="fp32", seed=1)
    assert base != hashed(model="mlp", global_batch=64, precision="amp-bf16", seed=1)


@pytest.mark.parametrize(
    ("ending", "status", "reason"),
    [
        (
            "with honestscale.record.start(**kw) as rec:\n    raise ValueError('diverged')",
            "failed",
            "ValueError: diverged",
        ),
        (
            "rec = honestscale.record.start(**kw)\nraise ValueError('diverged')",
            "failed",
            "ValueError: diverged",
        ),
        ("rec = honestscale.record.start(**kw)", "failed", "without recorder.stop()"),
        (
            "rec = honestscale.record.start(**kw)\nrec.stop('aborted', 'budget spent')",
            "aborted",
            "budget spent",
        ),
        ("import sys\nwith honestscale.record.start(**kw) as rec:\n    sys.exit(0)", "success", ""),
    ],
)
def test_every_way_out_of_a_script_ends_its_file(
    tmp_path: Path, ending: str, status: str, reason: str
) -> None:
    script = (
        "import honestscale.record\nkw = dict(framework='torch', run_id='r', sample_interval=0)\n" + ending
    )
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**os.environ, "HONESTSCALE_OUT": "out"},
                   capture_output=True, timeout=60, check=False)  # fmt: skip
    last = _events(tmp_path / "out" / "r" / "events-rank0.jsonl")[-1]
    assert last["kind"] == "run_stop" and last["status"] == status and reason in (last.get("reason") or "")


def test_a_plain_torch_loop_on_two_ranks_is_ingested_linted_and_reported(tmp_path: Path) -> None:
    """The README's plain loop (examples/record/plain_torch.py) under torchrun, 2 gloo ranks: both files land under
    one run id agreed through torch.distributed, HS106 judges the data phase it timed, the report has the run."""
    module("torch")
    data = tmp_path / "digits.npz"
    subprocess.run([sys.executable, REPO / "examples/record/digits_npz.py", data], check=True, timeout=120)
    env = {**os.environ, "HONESTSCALE_OUT": str(tmp_path / "events"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([TORCHRUN, "--standalone", "--nproc-per-node", "2", REPO / "examples/record/plain_torch.py",
                           data], env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "events").iterdir()
    files = sorted(p.name for p in run_dir.iterdir())
    assert files == ["events-rank0.jsonl", "events-rank1.jsonl"]
    for rank, name in enumerate(files):
        events = _events(run_dir / name)
        steps = [e for e in events if e["kind"] == "step"]
        assert events[0]["rank"] == rank and events[0]["world_size"] == 2 and events[0]["backend"] == "gloo"
        assert events[0]["command"][:3] == ["torchrun", "--nnodes=1", "--nproc-per-node=2"], (
            "re-runs both ranks"
        )
        assert len(steps) == 3 * 22 and sum(e["samples"] for e in steps) == 3 * 700
        assert all({"t_data", "t_compute", "t_optimizer"} <= e.keys() and "t_comm" not in e for e in steps)
        assert events[-1]["status"] == "success"
    store = str(tmp_path / "s.duckdb")
    assert _cli("ingest", str(tmp_path / "events"), "--store", store).exit_code == 0
    lint = _cli("lint", "--campaign", "plain-torch", "--store", store, "-f", "json", "--select", "HS106")
    assert json.loads(lint.output) == [], "HS106: no failure, nothing it cannot verify"
    table = _cli("lint", "--campaign", "plain-torch", "--store", store, "--select", "HS106").output
    (row,) = [
        cells
        for line in table.splitlines()
        if (cells := [c.strip() for c in line.split("│")])[1:2] == ["HS106"]
    ]
    assert row[4:6] == ["pass", "1"], table  # verdict pass, one comparison judged
    shown = _cli("report", "--campaign", "plain-torch", "--store", store, "--format", "json")
    assert shown.exit_code == 0, shown.output
    assert [r["run_id"] for r in json.loads(shown.output)["runs"]] == [run_dir.name]
