"""Steps from the hooks a framework calls, for the callbacks: what a callback can see, and nothing it cannot.

A framework's loop calls a callback at a batch's start (the batch fetched and on the device), before the optimizer
step (backward done) and at the batch's end. Between the end of one batch and the start of the next the loop
waits for the loader and moves the batch: that gap is the step's data phase. From the batch's start to the optimizer
hook is compute (gradient exchange hidden in backward included: communication is not seen, so it stays unknown);
from there to the batch's end, the optimizer. With gradient accumulation a step is every batch up to the one whose
optimizer step ran. A framework without one of these hooks leaves that phase unknown.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

from typing import Any

from honestscale.record._recorder import Recorder
from honestscale.record._step import Step


class Boundaries:
    """One rank's steps built from hook calls on the recorder's clock."""

    def __init__(self, recorder: Recorder, *, data_phase: bool = True) -> None:
        self.rec = recorder
        self.clock = recorder.clock
        self.data_phase = data_phase
        self.after: Any = None  # the previous batch's end (or the epoch's start): the data phase starts here
        self.step: Step | None = None
        self.compute_from: Any = None
        self.optimizer_from: Any = None

    def epoch_start(self) -> None:
        self.after = self.clock.now() if self.data_phase else None

    def batch_start(self, samples: int | None, tokens: Any = None) -> None:
        now = self.clock.now()
        if self.step is None:
            self.step = self.rec.step()
            self.step.open(begin=self.after if self.after is not None else now)
        if self.after is not None:
            self.step.add("data", self.after, now)
        self._count(samples, tokens)
        self.compute_from, self.optimizer_from = now, None

    def before_optimizer(self) -> None:
        if self.step is None or self.compute_from is None or self.optimizer_from is not None:
            return
        now = self.clock.now()
        self.step.add("compute", self.compute_from, now)
        self.optimizer_from = now

    def batch_end(
        self, stepped: bool, *, phases: bool = True, samples: int | None = None, tokens: Any = None
    ) -> None:
        """The batch ended; ``stepped``: its optimizer step ran, so the step ends here. ``phases``: the hooks in
        between were called (else the batch's time is the step's, with no phase). ``samples``, ``tokens``: counted
        during the batch (by a forward hook), where the start could not see the batch."""
        if self.step is None:
            return
        now = self.clock.now()
        self._count(samples, tokens)
        if phases and self.optimizer_from is not None:
            self.step.add("optimizer", self.optimizer_from, now)
        elif phases and self.compute_from is not None:
            self.step.add("compute", self.compute_from, now)
        self.after = now if self.data_phase else None
        self.compute_from = self.optimizer_from = None
        if stepped:
            step, self.step = self.step, None
            step.close(end=now)

    def _count(self, samples: int | None, tokens: Any) -> None:
        """Add a batch's samples and tokens to the step (tokens as a list: counts on a device are read later)."""
        assert self.step is not None
        if samples is not None:
            self.step.samples = (self.step.samples or 0) + samples
        if tokens is not None:
            held = self.step.tokens
            self.step.tokens = [*(held if isinstance(held, list) else [] if held is None else [held]), tokens]

    def pause(self) -> None:
        """The loop did other work since the last batch (logging, evaluating, saving): the next data phase starts
        now, so that work is in no step."""
        if self.step is None and self.data_phase:
            self.after = self.clock.now()

    def abandon(self) -> None:
        """The step under way will not end (an exception): it is not written."""
        self.step = None
