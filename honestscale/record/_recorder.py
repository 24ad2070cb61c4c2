"""One rank's run, from run_start to a run_stop on every exit path: the object the runners and users' loops call.

Standard library only at import time (see :mod:`honestscale.record`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import TracebackType
from typing import Any

from honestscale.events import EventWriter
from honestscale.record import pressure
from honestscale.record._clocks import Clock, CudaClock, HostClock
from honestscale.record._lifecycle import PeerFailed, RunTerminated, raising_handler, stop_status
from honestscale.record._sampler import SystemSampler
from honestscale.record._step import RecordError, Step
from honestscale.record.world import World


class Recorder:
    """One rank's run: ``run_start``, its steps, epochs and evaluations, and a ``run_stop`` on every exit path.

    Every event is one complete line written before the call returns (``EventWriter``), so a killed job keeps
    what it recorded. Used as a context manager (or through :func:`honestscale.record.start`), leaving the run
    writes its end:

    * normally: ``success`` unless :meth:`stop` wrote something else;
    * SIGTERM (Slurm's time limit, scancel): ``timeout``, or ``cancelled`` when Slurm says so;
    * SIGUSR1 (``honestscale run`` stopping the other ranks after one failed): ``failed``;
    * Ctrl-C: ``cancelled``; :class:`TargetNotReached`: ``aborted``; any other exception: ``failed`` with it as
      the reason.

    The exception then propagates, so the process still exits non-zero. ``handle_signals``: install the SIGTERM and
    SIGUSR1 handlers (main thread only; with ``"if-default"``, only where no other handler is set, so a framework's
    own stays in charge); ``signals``: which of the two (SIGUSR1 means "a peer failed" only under ``honestscale
    run``). ``clock``: None picks one at the first step (CUDA events once torch has initialised CUDA, else the host).
    """

    def __init__(self, out: str | os.PathLike[str], run_id: str, world: World, *, sample_interval: float = 1.0,
                 device: int | None = None, clock: Clock | None = None, warmup_steps: int = 0,
                 handle_signals: bool | str = True, signals: tuple[str, ...] = ("SIGTERM", "SIGUSR1")) -> None:  # fmt: skip
        self.writer = EventWriter(out, run_id, world.rank)
        self.world = world
        self._clock = clock
        self.warmup_steps = warmup_steps
        self.sampler = SystemSampler(self.writer, sample_interval, device) if sample_interval > 0 else None
        self.steps = 0  # steps written so far (a step waits for its device marks and a contention reading)
        self.current_epoch = 0
        self._closed_epoch: int | None = None
        self._epoch_began: float | None = None
        self._epoch_samples = 0
        self._pending: list[Step] = []
        self._old: dict[int, Any] = {}
        self._signals = handle_signals
        self._which = signals
        self._entered = False
        self._stopping = [False]  # shared with the signal handlers

    @property
    def clock(self) -> Clock:
        """The clock of the steps, chosen at the first step unless given: CUDA events once torch has initialised
        CUDA in this process (the device's time, read a step later), else the host's."""
        if self._clock is None:
            torch = sys.modules.get("torch")
            cuda = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
            self._clock = CudaClock() if cuda else HostClock()
        return self._clock

    @property
    def run_id(self) -> str:
        return self.writer.run_id

    @property
    def rank(self) -> int:
        return self.world.rank

    @property
    def world_size(self) -> int:
        return self.world.world_size

    @property
    def path(self) -> os.PathLike[str]:
        """This rank's event file."""
        return self.writer.path

    def __enter__(self) -> Recorder:
        if self._entered:
            return self
        self._entered = True
        if self._signals and threading.current_thread() is threading.main_thread():
            for sig, exc, what in (
                (signal.SIGTERM, RunTerminated, "SIGTERM: time limit reached or run cancelled"),
                (signal.SIGUSR1, PeerFailed, "stopped by the launcher because another rank failed"),
            ):
                if sig.name not in self._which:
                    continue
                if self._signals == "if-default" and signal.getsignal(sig) is not signal.SIG_DFL:
                    continue
                self._old[sig] = signal.signal(sig, raising_handler(exc, what, self._stopping))
        return self

    def run_start(self, **fields: Any) -> None:
        """Write run_start (the contract's fields, validated) and start sampling the system."""
        self.writer.run_start(**fields)
        if self.sampler is not None:
            self.sampler.start()

    # -- the training loop's calls ------------------------------------------------------------------------------

    def step(self, samples: int | None = None, tokens: Any = None, *, warmup: bool | None = None,
             epoch: int | None = None) -> Step:  # fmt: skip
        """A training step of this rank: ``with recorder.step(samples=64) as s:`` around it, ``with
        s.phase("data"):`` (or compute, comm, optimizer) around each part timed. ``samples``: this rank's samples
        in the step (may be set on ``s`` once the batch is known); ``tokens``: its tokens, where the batch has
        them (a device tensor is read a step later, without a synchronisation). ``warmup``: default, the first
        ``warmup_steps`` steps of the run."""
        if self.writer.stopped:
            raise RecordError(f"run {self.run_id}: step after run_stop; start a new run for more training")
        if self._epoch_began is None:
            self._epoch_began = time.perf_counter()
        self._closed_epoch = None
        return Step(self, self.clock, samples=samples, tokens=tokens, warmup=warmup, epoch=epoch)

    def _closed(self, step: Step) -> None:
        """Write the steps that are ready: what the clock can read (all but the last on a device) and the host's
        contention readings cover (one every ``pressure.RATE`` seconds: short steps are written together)."""
        self._pending.append(step)
        for _ in range(pressure.ready(self._pending, _host_end, 1 if self.clock.lagged else 0)):
            self._write(self._pending.pop(0))

    def _write(self, step: Step) -> None:
        number = self.steps
        self.steps += 1
        warmup = number < self.warmup_steps if step.warmup is None else step.warmup
        epoch = self.current_epoch if step.epoch is None else step.epoch
        self.writer.step(step=number, epoch=epoch, samples=step.samples, warmup=warmup, **step.fields())
        self._epoch_samples += step.samples or 0

    def flush(self) -> None:
        """Write the steps still pending (device marks not yet readable, or no contention reading after them yet): at
        an epoch's end, before an evaluation and at the end of training."""
        while self._pending:
            self._write(self._pending.pop(0))

    def epoch(self, epoch: int | None = None, *, train_loss: float | None = None,
              train_accuracy: float | None = None, samples: int | None = None,
              t_total: float | None = None) -> None:  # fmt: skip
        """The end of an epoch (default: the current one), with the training loss or accuracy the loop averaged;
        ``samples`` and ``t_total`` default to this rank's steps since the last epoch and the time since the first
        of them. Later steps belong to the next epoch; an evaluation before them, to this one."""
        self.flush()
        number = self.current_epoch if epoch is None else epoch
        if t_total is None and self._epoch_began is not None:
            t_total = time.perf_counter() - self._epoch_began
        self.writer.epoch(epoch=number, train_loss=train_loss, train_accuracy=train_accuracy,
                          samples=self._epoch_samples if samples is None else samples, t_total=t_total)  # fmt: skip
        self.current_epoch = number + 1
        self._closed_epoch = number
        self._epoch_began, self._epoch_samples = None, 0

    def eval(self, split: str, metric: str, value: float, *, samples: int | None = None,
             epoch: int | None = None) -> None:  # fmt: skip
        """An evaluation: ``split`` train, validation or test; ``metric`` what it measures (accuracy, loss, ...);
        ``samples`` how many it evaluated. Call it on the ranks that evaluated (one, unless each has a shard)."""
        self.flush()
        self.writer.eval(split=split, metric=metric, value=float(value), samples=samples,
                         epoch=self._eval_epoch() if epoch is None else epoch)  # fmt: skip

    def _eval_epoch(self) -> int:
        """An evaluation belongs to the epoch just ended (no step since), else to the one under way."""
        return self.current_epoch if self._closed_epoch is None else self._closed_epoch

    def stop(self, status: str = "success", reason: str | None = None) -> None:
        """End the run: write the pending steps and the run_stop (once: later calls do nothing), stop sampling."""
        if self.writer.stopped:
            return
        try:
            self.flush()
        finally:
            if self.sampler is not None:
                self.sampler.stop()
            self.writer.run_stop(status, reason)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping[0] = True  # first: from here no handler raises
        main = threading.current_thread() is threading.main_thread()
        if main:  # a second signal must not cut the run_stop in half
            for sig in self._old:
                signal.signal(sig, signal.SIG_IGN)
        try:
            status, reason = stop_status(exc)
            if exc is not None and self._pending:
                # steps whose device marks completed are written; the rest (a device that failed, work cut short)
                # cannot be read without waiting on it, and the reason says how many
                ready = [st for st in self._pending if st.ready()]
                lost = len(self._pending) - len(ready)
                self._pending = ready
                if lost:
                    reason = f"{reason or status}; {lost} step(s) whose device time could not be read are not recorded"
            self.stop(status, reason)
        finally:
            self.writer.close()
            for sig, old in self._old.items():
                signal.signal(sig, old)


def _host_end(step: Step) -> float:
    return float("-inf") if step.host is None else step.host[1]  # (a step never opened: nothing to wait for)
