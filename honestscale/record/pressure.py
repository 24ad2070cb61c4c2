"""The host's CPU contention over a step: Linux's pressure stall information and the hypervisor's steal time.

* ``/proc/pressure/cpu`` (PSI, Linux 4.20+): its ``some`` line counts, in microseconds since boot, the time in which
  at least one task on the host was runnable and waited for a CPU: this run's own threads and every other
  process's. Kernels without PSI (older, or booted with ``psi=0``) give nothing.
* ``/proc/stat``'s ``steal``: the time a virtual machine's CPUs wanted to run while the hypervisor ran another
  guest, in clock ticks summed over the CPUs (a shared cloud or CI machine's noise, which PSI inside the guest
  does not see). Divided by the CPUs, it is the wall time each CPU lost, on average. Read on a virtual machine
  only (the CPU flag ``hypervisor``): on bare metal there is none, and /proc/stat costs more to read than PSI.

Read at a step's start and end, the differences are how long the step shared its host with more work than it had
CPUs for. A step slowed by someone else's load carries that wait; a step slowed by its own warm-up (compilation,
allocation, caches) does not. What the kernel does not count is left out of the step event: unknown, never 0.

The readings are on the step's path, so they cost as little as the kernel allows: each file stays open and is read
again from its start (``pread``, one system call, about 3 µs for PSI and 7 µs for /proc/stat, alone; between a
training loop's kernels they cost several times that: ``benchmarks/runner_overhead.py``). Two ways to read:

* :func:`at_start` and :func:`now`, for a step written as it ends (the Keras callback): one reading per step
  boundary (a step that starts within :data:`REUSE` seconds of the last reading, the previous step's end,
  starts from it; the wait in that gap, at most its length, counts in the step that follows).
* :func:`mark` and :func:`between`, for steps that may be written a little later (the runners' step timer, the
  recorder that users' loops and the callbacks call): the counters are read at a step boundary only where the last
  reading is :data:`RATE` seconds old or more, and a step's wait is the counters' rise over its span, taken
  linearly between the readings around it. A step of :data:`RATE` or longer is read at both ends, as above; shorter
  steps share a reading every :data:`RATE` seconds, each with the part of the wait its span covers, so sums over
  steps (what HS205, HS208 and HS210 compare) are the readings' differences and a stall of :data:`RATE` or more
  stays, but for a short neighbour's share, on the steps it slowed.

Standard library only (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypedDict, TypeVar

PSI = "/proc/pressure/cpu"
STAT = "/proc/stat"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CPUS = os.cpu_count() or 1
REUSE = 0.00025  # seconds: a step starting this soon after the last reading starts from it
RATE = 0.05  # seconds: at most one reading this often at the step timer's boundaries (see the module)
T = TypeVar("T")  # a held step, as its keeper holds it


def _virtual() -> bool:
    """Whether this is a virtual machine (the CPU flag ``hypervisor``): only a guest has steal time to read."""
    try:
        with open("/proc/cpuinfo", "rb") as f:  # noqa: PTH123 (the standard library only, no pathlib needed)
            return any(line.startswith(b"flags") and b" hypervisor" in line for line in f)
    except OSError:
        return False


_readable = {PSI: True, STAT: _virtual()}  # bare metal has no steal: /proc/stat is not read every step there

Reading = tuple[float | None, float | None]  # PSI's "some" total (microseconds), steal (ticks over every CPU)


_fds: dict[str, int] = {}  # each file open once per process, read again from its start


def _read(path: str) -> bytes:
    fd = _fds.get(path)
    if fd is None:
        fd = _fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, 512, 0)
    except OSError:  # closed under us (a library closing every descriptor): opened again, once
        del _fds[path]
        fd = _fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(fd, 512, 0)


def _first_line(path: str) -> bytes | None:
    if not _readable[path]:
        return None
    try:
        return _read(path).split(b"\n", 1)[0]
    except OSError:  # not there (no PSI, not Linux), or EOPNOTSUPP when booted with psi=0
        _readable[path] = False
        return None


def _psi() -> int | None:
    line = _first_line(PSI)
    try:
        return None if line is None else int(line.rsplit(b"total=", 1)[1])
    except (IndexError, ValueError):
        _readable[PSI] = False
        return None


def _steal() -> int | None:
    line = _first_line(STAT)  # "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
    parts = line.split() if line is not None else []
    if len(parts) < 9 or parts[0] != b"cpu":
        _readable[STAT] = False
        return None
    return int(parts[8])


_last: tuple[float, Reading] = (float("-inf"), (None, None))  # when the last reading was taken, and it
_history: deque[tuple[float, Reading]] = deque(maxlen=64)  # the last readings, oldest first (see between)


def now() -> Reading:
    """The host's contention counters now (a step's end)."""
    global _last
    taken = time.perf_counter()
    reading = _psi(), _steal()
    _last = (taken, reading)
    _history.append(_last)
    return reading


def at_start() -> Reading:
    """The counters for a step that starts now: the last reading where it is under :data:`REUSE` seconds old (the
    previous step's end), else a new one."""
    taken, reading = _last
    return reading if time.perf_counter() - taken <= REUSE else now()


def mark() -> float:
    """A step boundary's time on the host clock (``time.perf_counter``), with a reading there where the last is
    :data:`RATE` seconds old or more."""
    t = time.perf_counter()
    if t - _last[0] >= RATE:
        now()
        return _last[0]
    return t


def covered(t: float) -> bool:
    """Whether a reading at or after the mark ``t`` exists (a step ending at ``t`` can be given its wait)."""
    return _last[0] >= t


def ready(pending: Sequence[T], end: Callable[[T], float], keep: int) -> int:
    """How many of the steps ``pending`` (oldest first) can be written: all but the last ``keep`` (a device clock's
    lag), and of those the ones whose end mark (``end``) a reading covers (short steps come out together)."""
    n = len(pending) - keep
    if n <= 0 or not covered(end(pending[0])):
        return 0  # (the common case between readings: nothing scanned)
    while not covered(end(pending[n - 1])):
        n -= 1
    return n


def _counter(a: float | None, b: float | None, share: float) -> float | None:
    return None if a is None or b is None else a + (b - a) * share


def _at(t: float) -> Reading | None:
    """The counters at the mark ``t``, linear between the readings around it; None before the oldest kept."""
    after = None
    for i in range(len(_history) - 1, -1, -1):  # the recent end first: marks are of the last steps
        if _history[i][0] < t:
            break
        after = i
    if after is None:
        return None
    t1, (p1, s1) = _history[after]
    if t1 == t:
        return p1, s1
    if after == 0:
        return None
    t0, (p0, s0) = _history[after - 1]
    share = (t - t0) / (t1 - t0)
    return _counter(p0, p1, share), _counter(s0, s1, share)


class Contention(TypedDict, total=False):
    """A step event's contention fields (seconds; a counter the host does not give is left out)."""

    cpu_pressure: float
    cpu_steal: float


def between(begin: float, end: float) -> Contention:
    """The step event's contention fields for a step from mark ``begin`` to mark ``end`` (see :func:`mark`): read
    now where no reading covers ``end`` yet (the end of training)."""
    if not covered(end):
        now()
    return waited(_at(begin), _at(end))


def waited(begin: Reading | None, end: Reading | None) -> Contention:
    """The step event's ``cpu_pressure`` and ``cpu_steal`` fields (seconds) from two readings; a counter either
    reading lacks is left out."""
    out: Contention = {}
    if begin is None or end is None:
        return out
    (p0, s0), (p1, s1) = begin, end
    if p0 is not None and p1 is not None and p1 >= p0:
        out["cpu_pressure"] = (p1 - p0) / 1e6
    if s0 is not None and s1 is not None and s1 >= s0:
        out["cpu_steal"] = (s1 - s0) / _TICK / _CPUS
    return out
