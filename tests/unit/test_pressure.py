"""The host's contention counters as the step reads them: from files kept open and read again from their start, once
per step boundary in a training loop."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from honestscale.record import pressure


@pytest.fixture
def psi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cpu"
    path.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 total=7\n")
    monkeypatch.setattr(pressure, "PSI", str(path))
    monkeypatch.setattr(pressure, "_readable", {str(path): True, pressure.STAT: False})
    monkeypatch.setattr(pressure, "_fds", {})
    monkeypatch.setattr(pressure, "_last", (float("-inf"), (None, None)))
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
