"""The step timer: each step's wall time split into data, compute, communication and optimizer.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

from typing import Any

from honestscale.record import pressure
from honestscale.record._clocks import Clock, HostClock


class StepTimer:
    """Splits each training step into data, compute, communication and optimizer time.

    Call :meth:`begin` before fetching the batch, :meth:`mark` ``"data"`` once it is on the
    device, ``"compute"`` when backward returns and ``"optimizer"`` after the update, then
    :meth:`end`, which returns the steps whose timings are ready (at once, or with later ones: see :meth:`end`).
    ``comm_from`` (a mark of the same clock taken when the last gradient bucket
    was handed to the all-reduce) turns the part of backward spent waiting for gradient
    exchange into communication time; without it communication is recorded as not measured.
    The parts always sum to the step's total.
    """

    PHASES = ("data", "compute", "optimizer")

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or HostClock()
        self._current: dict[str, Any] = {}
        self._pending: list[dict[str, Any]] = []

    def begin(self) -> None:
        # the host's mark before the clock's: a contention reading's cost falls between steps, not in one
        host = pressure.mark()
        self._current = {"begin": self.clock.now(), "host": host}

    def mark(self, phase: str) -> None:
        self._current[phase] = self.clock.now()

    def end(self, comm_from: Any = None, comm_s: float | None = None, **fields: Any) -> list[dict[str, Any]]:
        """Close the step; return the timings that are ready (this step's, or the previous one's on a device).
        ``comm_s``: communication measured in seconds instead (waits summed by the runner), part of compute."""
        self._current["comm_from"] = comm_from
        self._current["comm_s"] = comm_s
        self._current["fields"] = fields
        self._current["host_end"] = pressure.mark()
        self._pending.append(self._current)
        self._current = {}
        ready = pressure.ready(self._pending, _host_end, 1 if self.clock.lagged else 0)
        if not ready:
            return []
        done, self._pending = self._pending[:ready], self._pending[ready:]
        return [self._resolve(step) for step in done]

    def flush(self) -> list[dict[str, Any]]:
        """Timings of every step not yet returned (call at the end of an epoch, of training, and on the way out of a
        failed one: up to :data:`pressure.RATE` seconds of short steps wait for a reading)."""
        ready, self._pending = self._pending, []
        return [self._resolve(step) for step in ready]

    def _resolve(self, step: dict[str, Any]) -> dict[str, Any]:
        s = self.clock.seconds
        t_data = s(step["begin"], step["data"])
        t_compute = s(step["data"], step["compute"])
        t_optimizer = s(step["compute"], step["optimizer"])
        out = dict(step["fields"])
        if step["comm_from"] is not None or step.get("comm_s") is not None:
            waited = 0.0 if step["comm_from"] is None else s(step["comm_from"], step["compute"])
            t_comm = min(max(waited + (step.get("comm_s") or 0.0), 0.0), t_compute)
            out.update(t_comm=t_comm, comm_measured=True)
            t_compute -= t_comm
        else:
            out.update(t_comm=0.0, comm_measured=False)
        out.update(t_data=t_data, t_compute=t_compute, t_optimizer=t_optimizer)
        out["t_total"] = t_data + t_compute + out["t_comm"] + t_optimizer
        out.update(pressure.between(step["host"], step["host_end"]))
        return out


def _host_end(step: dict[str, Any]) -> float:
    return float(step["host_end"])
