"""One training step as the user's loop (or a framework's callback) times it: its span and the phases seen inside.

A phase is data (waiting for the loader, the batch's transfer), compute (forward and backward), comm (gradient
exchange the loop waits for) or optimizer (the update). Only the phases timed are recorded: a phase nobody timed is
left out of the step event (unknown), never written as zero, so a rule that needs it says it cannot verify. Time of the
step outside every phase stays in ``t_total`` only.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Required

from honestscale.record import pressure
from honestscale.record._clocks import Clock

PHASES = ("data", "compute", "comm", "optimizer")


class Timing(pressure.Contention, total=False):
    """What a step's timing gives its event: the total, each phase (None: not timed), tokens, contention."""

    t_total: Required[float]
    t_data: float | None
    t_compute: float | None
    t_comm: float | None
    t_optimizer: float | None
    comm_measured: bool
    tokens: int | None


class RecordError(ValueError):
    """A call the recorder cannot record as asked; the message names the argument and the fix."""


class Step:
    """A step of one rank, open from :meth:`open` (or entering the ``with`` block) to :meth:`close`.

    ``samples`` (this rank's samples in the step) and ``tokens`` may be set while the step is open, once the batch
    is known. Phases are timed with :meth:`phase` (a ``with`` block) or added from marks of the recorder's clock with
    :meth:`add`; the same phase twice in a step adds up (gradient accumulation); phases do not nest.
    """

    def __init__(self, recorder: Any, clock: Clock, *, samples: int | None, tokens: Any, warmup: bool | None,
                 epoch: int | None) -> None:  # fmt: skip
        self._recorder = recorder
        self._clock = clock
        self.samples = samples
        self.tokens = tokens
        self.warmup = warmup
        self.epoch = epoch
        self.begin: Any = None
        self.end: Any = None
        self.spans: dict[str, list[tuple[Any, Any]]] = {}
        self._in: str | None = None
        # its span on the host clock, for the contention readings
        self.host: tuple[float, float] | None = None

    def open(self, begin: Any = None) -> Step:
        """Start the step now, or at ``begin`` (a mark of the recorder's clock taken earlier)."""
        opened = pressure.mark()  # taken before the clock's mark: a reading's cost falls between steps
        self.host = (opened, opened)
        self.begin = self._clock.now() if begin is None else begin
        return self

    def __enter__(self) -> Step:
        return self.open()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` (data, compute, comm or optimizer) of this step."""
        _check_phase(name)
        if self._in is not None:
            raise RecordError(f"phase {name!r} opened inside phase {self._in!r}: phases of a step do not nest; "
                              "close one before opening the next")  # fmt: skip
        if self.begin is None or self.end is not None:
            raise RecordError(
                f"phase {name!r} outside an open step: use it inside `with recorder.step(...) as s:`"
            )
        self._in = name
        start = self._clock.now()
        try:
            yield
        finally:
            self._in = None
            self.spans.setdefault(name, []).append((start, self._clock.now()))

    def add(self, name: str, start: Any, end: Any) -> None:
        """Add phase ``name`` from two marks of the recorder's clock (for callbacks that see boundaries, not blocks)."""
        _check_phase(name)
        self.spans.setdefault(name, []).append((start, end))

    def close(self, end: Any = None) -> None:
        """End the step now (or at the mark ``end``) and hand it to the recorder, which writes it once its clock
        can be read (at once on the host; a step later on a device)."""
        if self.samples is None:
            raise RecordError("a step ended without its samples: pass recorder.step(samples=N) or set "
                              "step.samples = N (this rank's samples in the step) before it ends")  # fmt: skip
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 0:
            raise RecordError(
                f"step samples={self.samples!r}: an integer >= 0 (this rank's samples in the step)"
            )
        if self.end is not None:
            raise RecordError(
                "a step ended twice: each step is closed once (leaving its `with` block does it)"
            )
        if self.tokens is not None:  # a count on the device starts its copy now, to be read a step later
            self.tokens = (
                [defer(v) for v in self.tokens] if isinstance(self.tokens, list) else defer(self.tokens)
            )
        self.end = self._clock.now() if end is None else end
        if self.host is not None:
            self.host = (self.host[0], pressure.mark())
        self._recorder._closed(self)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.close()  # a step cut by an exception is not a step: the run_stop says why the run ended

    def ready(self) -> bool:
        """Whether the step's marks can be read without waiting (a device's end event has completed)."""
        query = getattr(self.end, "query", None)
        try:
            return self.end is not None and (query is None or bool(query()))
        except Exception:  # a device that failed: its marks are lost
            return False

    def fields(self) -> Timing:
        """The step event's timing fields: the total, and each phase timed (seconds; None where not timed); comm
        says whether it was measured. Reading a device clock waits for its marks."""
        s = self._clock.seconds
        timed = {
            name: sum(max(s(a, b), 0.0) for a, b in self.spans[name]) for name in PHASES if name in self.spans
        }
        out: Timing = {
            "t_total": max(s(self.begin, self.end), 0.0),
            "t_data": timed.get("data"),
            "t_compute": timed.get("compute"),
            "t_comm": timed.get("comm"),
            "t_optimizer": timed.get("optimizer"),
            "comm_measured": "comm" in self.spans,
        }
        if self.tokens is not None:
            out["tokens"] = count(self.tokens)
        if self.host is not None:  # the host's contention over the step
            return {**out, **pressure.between(*self.host)}
        return out


class Deferred:
    """A count still on the device: copied to pinned host memory behind a CUDA event when it was counted, read
    when the step is written (a step later), so reading it never waits for the work queued since."""

    def __init__(self, value: Any) -> None:
        import torch

        self._host = torch.empty(value.shape, dtype=value.dtype, pin_memory=True)
        self._host.copy_(value.detach(), non_blocking=True)
        self._done = torch.cuda.Event()
        self._done.record()

    def read(self) -> int:
        self._done.synchronize()
        return int(self._host.sum())


def defer(value: Any) -> Any:
    """``value`` as a count the step can hold: a CUDA tensor becomes a :class:`Deferred` (no synchronisation now),
    anything else stays as it is."""
    return Deferred(value) if getattr(value, "is_cuda", False) else value


def count(value: Any) -> int:
    """Read a count: an integer, a host tensor, a :class:`Deferred`, or a list of these (added up)."""
    if isinstance(value, list):
        return sum(count(v) for v in value)
    if isinstance(value, Deferred):
        return value.read()
    return int(value)


def _check_phase(name: str) -> None:
    if name not in PHASES:
        raise RecordError(f"phase {name!r} is not one of {', '.join(PHASES)}")
