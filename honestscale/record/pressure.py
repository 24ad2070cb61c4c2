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
again from its start (``pread``, one system call, about 3 µs for PSI and 7 µs for /proc/stat), and a step that starts
within :data:`REUSE` seconds of the last reading (the previous step's end, in a training loop) starts from it: one
reading per step boundary. The wait in that gap, at most its length, counts in the step that follows.

Standard library only (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import os
import time

PSI = "/proc/pressure/cpu"
STAT = "/proc/stat"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CPUS = os.cpu_count() or 1
REUSE = 0.00025  # seconds: a step starting this soon after the last reading starts from it


def _virtual() -> bool:
    """Whether this is a virtual machine (the CPU flag ``hypervisor``): only a guest has steal time to read."""
    try:
        with open("/proc/cpuinfo", "rb") as f:  # noqa: PTH123 (the standard library only, no pathlib needed)
            return any(line.startswith(b"flags") and b" hypervisor" in line for line in f)
    except OSError:
        return False


_readable = {PSI: True, STAT: _virtual()}  # bare metal has no steal: /proc/stat is not read every step there

Reading = tuple[int | None, int | None]  # PSI's "some" total (microseconds), steal (ticks over every CPU)


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


def now() -> Reading:
    """The host's contention counters now (a step's end)."""
    global _last
    reading = _psi(), _steal()
    _last = (time.perf_counter(), reading)
    return reading


def at_start() -> Reading:
    """The counters for a step that starts now: the last reading where it is under :data:`REUSE` seconds old (the
    previous step's end), else a new one."""
    taken, reading = _last
    return reading if time.perf_counter() - taken <= REUSE else now()


def waited(begin: Reading | None, end: Reading | None) -> dict[str, float]:
    """The step event's ``cpu_pressure`` and ``cpu_steal`` fields (seconds) from two readings; a counter either
    reading lacks is left out."""
    out: dict[str, float] = {}
    if begin is None or end is None:
        return out
    (p0, s0), (p1, s1) = begin, end
    if p0 is not None and p1 is not None and p1 >= p0:
        out["cpu_pressure"] = (p1 - p0) / 1e6
    if s0 is not None and s1 is not None and s1 >= s0:
        out["cpu_steal"] = (s1 - s0) / _TICK / _CPUS
    return out
