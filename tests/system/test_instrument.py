"""Shared instrumentation: the step timer's parts, the sampler, and a run_stop on every exit path."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from honestscale import events as ev
from honestscale.record.world import discover
from honestscale.runners.instrument import HostClock, Recorder, StepTimer, TargetNotReached
from tests.conftest import REPO


class FakeClock(HostClock):
    """A host clock whose time the test sets."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def test_step_parts_sum_to_the_step_and_comm_comes_out_of_backward() -> None:
    clock = FakeClock()
    timer = StepTimer(clock)
    timer.begin()
    clock.t = 0.010
    timer.mark("data")
    comm_from = 0.050  # last gradient bucket handed to the all-reduce
    clock.t = 0.080
    timer.mark("compute")
    clock.t = 0.090
    timer.mark("optimizer")
    (step,) = [
        *timer.end(comm_from, step=0, samples=32),
        *timer.flush(),
    ]  # at once, or when a reading covers it
    assert step["t_data"] == pytest.approx(0.010)
    assert step["t_comm"] == pytest.approx(0.030) and step["comm_measured"] is True
    assert step["t_compute"] == pytest.approx(0.040)
    assert step["t_optimizer"] == pytest.approx(0.010)
    assert step["t_total"] == pytest.approx(0.090)
    ev.validate({"schema": 1, "run_id": "r", "rank": 0, "seq": 0, "time": 1.0, "kind": "step"} | step)


def test_one_worker_records_zero_communication_marked_unmeasured() -> None:
    timer = StepTimer()
    timer.begin()
    for phase in StepTimer.PHASES:
        time.sleep(0.001)
        timer.mark(phase)
    (step,) = [*timer.end(None, step=0, samples=1), *timer.flush()]
    assert step["t_comm"] == 0.0 and step["comm_measured"] is False
    parts = step["t_data"] + step["t_compute"] + step["t_optimizer"]
    assert parts == pytest.approx(step["t_total"]) and step["t_total"] >= 0.003


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("exc", "status", "reason"),
    [
        (None, "success", None),
        (RuntimeError("CUDA error: out of memory"), "failed", "RuntimeError: CUDA error: out of memory"),
        (TargetNotReached("validation accuracy never reached 0.99"), "aborted", "never reached 0.99"),
        (KeyboardInterrupt(), "cancelled", "interrupted"),
    ],
)
def test_every_exit_path_writes_run_stop(tmp_path: Path, exc: BaseException | None, status: str,
                                         reason: str | None) -> None:  # fmt: skip
    def body() -> None:
        with Recorder(tmp_path, "r", discover({}), sample_interval=0.05) as rec:
            rec.run_start(framework="torch", world_size=1)
            time.sleep(0.2)
            if exc is not None:
                raise exc

    if exc is None:
        body()
    else:
        with pytest.raises(type(exc)):
            body()
    events = _events(tmp_path / "r" / "events-rank0.jsonl")
    assert events[0]["kind"] == "run_start" and events[-1]["kind"] == "run_stop"
    assert events[-1]["status"] == status
    if reason:
        assert reason in events[-1]["reason"]
    samples = [e for e in events if e["kind"] == "system"]
    assert samples and all(e["rss_bytes"] > 0 for e in samples)
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_sigterm_writes_timeout_and_keeps_earlier_events(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from honestscale.runners.instrument import Recorder\n"
        "from honestscale.record.world import discover\n"
        f"with Recorder({str(tmp_path)!r}, 'r', discover({{}}), sample_interval=0) as rec:\n"
        "    rec.run_start(framework='torch', world_size=1)\n"
        "    for i in range(100000):\n"
        "        rec.writer.step(step=i, samples=1, t_total=0.01)\n"
        "        print(i, flush=True) if i == 5 else None\n"
        "        time.sleep(0.01)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "5"
    proc.terminate()
    proc.wait(30)
    assert proc.returncode != 0
    events = _events(tmp_path / "r" / "events-rank0.jsonl")
    assert events[-1]["kind"] == "run_stop" and events[-1]["status"] == "timeout"
    steps = [e["step"] for e in events if e["kind"] == "step"]
    assert steps == list(range(len(steps))) and len(steps) >= 6


def test_a_second_signal_while_stopping_does_not_replace_the_first(tmp_path: Path) -> None:
    """SIGTERM from the launcher, then its SIGUSR1 (sent when a peer exited on the same SIGTERM) arriving while
    this rank is still unwinding: the run records the first cause, and always writes its run_stop."""
    import os
    import signal

    from honestscale.runners.instrument import RunTerminated

    with pytest.raises(RunTerminated), Recorder(tmp_path, "r", discover({}), sample_interval=0) as rec:
        rec.run_start(framework="torch", world_size=1)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler raises here
        finally:
            os.kill(os.getpid(), signal.SIGUSR1)  # the peer's SIGUSR1, during the unwinding
            time.sleep(0.1)
    events = _events(tmp_path / "r" / "events-rank0.jsonl")
    assert events[-1]["kind"] == "run_stop" and events[-1]["status"] == "timeout", events[-1]
