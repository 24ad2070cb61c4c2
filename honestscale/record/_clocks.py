"""Clocks for step timing: the host clock, and CUDA events that time the device's own work.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol


class Clock(Protocol):
    """Marks time on the host, or on an accelerator's stream."""

    lagged: bool  # marks can only be read a step later (device clocks)

    def now(self) -> Any: ...

    def seconds(self, start: Any, end: Any) -> float: ...


class HostClock:
    lagged = False

    def now(self) -> float:
        return time.perf_counter()

    def seconds(self, start: Any, end: Any) -> float:
        return float(end - start)


class CudaClock:
    """CUDA events recorded on the current stream: no host synchronisation on the hot path.

    A step's marks are read when the next step ends (its last event has long completed by
    then, so ``synchronize`` on it rarely waits).
    """

    lagged = True

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def now(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0
