"""The host's contention counters as the step reads them: from files kept open and read again from their start, once
per step boundary in a training loop."""

from __future__ import annotations

import itertools
import os
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import pytest

from honestscale.record import pressure
from honestscale.record._clocks import HostClock
from honestscale.record._timer import StepTimer


@pytest.fixture
def psi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cpu"
    path.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 total=7\n")
    monkeypatch.setattr(pressure, "PSI", str(path))
    monkeypatch.setattr(pressure, "_readable", {str(path): True, pressure.STAT: False})
    monkeypatch.setattr(pressure, "_fds", {})
    monkeypatch.setattr(pressure, "_last", (float("-inf"), (None, None)))
    monkeypatch.setattr(pressure, "_history", deque(maxlen=64))
    return path


def _rewrite(path: Path, total: int) -> None:
    """New counters in the same file (as the kernel's are: the open descriptor sees them)."""
    with path.open("r+") as f:
        f.write(f"some avg10=0.00 avg60=0.00 avg300=0.00 total={total:<10d}\n")


def test_a_reading_is_taken_anew_from_the_open_file(psi: Path) -> None:
    assert pressure.now() == (100, None)
    _rewrite(psi, 250)
    assert pressure.now() == (250, None), "the file kept open is read again from its start"
    assert len(pressure._fds) == 1


def test_a_step_starting_right_after_the_last_reading_starts_from_it(
    psi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the module's clock, moved by the test: on a loaded machine the rewrite alone can take longer than REUSE
    clock = SimpleNamespace(t=1000.0)
    monkeypatch.setattr(pressure, "time", SimpleNamespace(perf_counter=lambda: clock.t))
    end_of_last = pressure.now()
    _rewrite(psi, 400)
    clock.t += pressure.REUSE / 2
    assert pressure.at_start() == end_of_last, "within REUSE of the previous step's end: no second reading"
    clock.t += pressure.REUSE * 4
    assert pressure.at_start() == (400, None), (
        "after a gap (an evaluation, a checkpoint) a reading of its own"
    )
    assert pressure.waited((100, None), (400, None)) == {"cpu_pressure": 300 / 1e6}


def test_a_descriptor_closed_under_the_reader_is_opened_again(psi: Path) -> None:
    pressure.now()
    os.close(pressure._fds[pressure.PSI])  # a library that closes every descriptor (a daemonising launcher)
    _rewrite(psi, 900)
    assert pressure.now() == (900, None)


def test_a_kernel_without_the_file_gives_no_reading(psi: Path) -> None:
    psi.unlink()
    pressure._fds.clear()
    assert pressure.now() == (None, None)
    assert pressure.waited(pressure.now(), pressure.now()) == {}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The module's clock, moved by the test."""
    c = SimpleNamespace(t=1000.0)
    monkeypatch.setattr(pressure, "time", SimpleNamespace(perf_counter=lambda: c.t))
    return c


def test_short_steps_share_a_reading_every_rate_and_each_gets_its_part_of_the_wait(
    psi: Path, clock: SimpleNamespace
) -> None:
    """Steps of a tenth of RATE: the counters are read at the first boundary and again once RATE has passed; each
    step gets the rise over its span, linear between the readings, and the steps' sum is the readings' difference."""
    tenth = pressure.RATE / 10
    clock.t = 0.0
    marks = [pressure.mark()]  # a reading: none was taken before
    _rewrite(psi, 100 + 1000)  # 1 ms of waiting over the next RATE seconds
    for k in range(1, 11):
        clock.t = k * tenth  # (not summed: the tenth mark is RATE after the first, exactly)
        marks.append(pressure.mark())
    assert len(pressure._history) == 2, "one reading at the start, the next RATE seconds later"
    assert [pressure.covered(m) for m in marks] == [True] * 11
    waits = [pressure.between(a, b)["cpu_pressure"] for a, b in itertools.pairwise(marks)]
    assert waits == pytest.approx([1000 / 10 / 1e6] * 10)
    assert sum(waits) == pytest.approx(1000 / 1e6)


def test_a_stall_longer_than_rate_stays_on_the_step_it_slowed(psi: Path, clock: SimpleNamespace) -> None:
    fast = pressure.RATE / 10
    begin = pressure.mark()
    clock.t += fast
    end = pressure.mark()  # no reading: not yet RATE since the first
    assert not pressure.covered(end)
    _rewrite(psi, 100 + 50)
    clock.t += 0.001
    stalled_begin = pressure.mark()
    clock.t += 3 * pressure.RATE  # the host's other work held this step for 3 RATE: 3 RATE of waiting
    _rewrite(psi, 100 + 50 + int(3 * pressure.RATE * 1e6))
    stalled_end = pressure.mark()  # read: RATE has passed
    assert pressure.covered(end) and pressure.covered(stalled_end)
    first = pressure.between(begin, end)["cpu_pressure"]
    stalled = pressure.between(stalled_begin, stalled_end)["cpu_pressure"]
    # no reading at the stalled step's start (not RATE after the last): the window's wait is shared by time, and the
    # stall's own step keeps all but the short step's part of it
    assert stalled > 0.9 * 3 * pressure.RATE, "the stall on the stalled step"
    assert first < 0.05 * stalled


def test_a_step_no_reading_covers_yet_is_read_when_asked(psi: Path, clock: SimpleNamespace) -> None:
    begin = pressure.mark()
    clock.t += pressure.RATE / 4
    end = pressure.mark()
    _rewrite(psi, 400)
    assert not pressure.covered(end)
    assert dict(pressure.between(begin, end)) == {
        "cpu_pressure": pytest.approx(300 / 1e6)
    }  # read now: all of it


def test_a_mark_older_than_every_kept_reading_has_no_wait(psi: Path, clock: SimpleNamespace) -> None:
    ancient = clock.t - 1.0
    begin = pressure.mark()
    assert pressure.between(ancient, begin) == {}, "unknown, never 0"


def test_the_step_timer_hands_out_short_steps_once_a_reading_covers_them(
    psi: Path, clock: SimpleNamespace
) -> None:
    timer = StepTimer(HostClock())
    out: list[dict[str, object]] = []
    for i in range(12):  # steps of a tenth of RATE
        timer.begin()
        for phase in StepTimer.PHASES:
            timer.mark(phase)
        clock.t += pressure.RATE / 10
        out += timer.end(None, step=i, samples=1)
        if i < 9:
            assert not out, "no reading covers the first steps yet"
    assert 10 <= len(out) < 12, "the reading RATE after the first covers every step before it"
    assert [s["step"] for s in out] == list(range(len(out)))
    out += timer.flush()
    assert [s["step"] for s in out] == list(range(12)) and all("cpu_pressure" in s for s in out)
