"""The training loop every PyTorch runner shares: epochs of timed steps, stop criteria, evaluations, the ranks'
joint decisions.

A runner gives it what differs between models and layouts: the batches of an epoch, one optimizer step on a batch
(which marks ``compute`` and ``optimizer`` on the step timer itself and says how much of it was communication),
and an evaluation. The loop owns the rest, once: the step timer and its events, warm-up marks, the sample and time
budgets (the ranks agree on the time limit, their clocks differ), the epoch events, when to evaluate, the target
and the final held-out test.

Standard library only at import time (see :mod:`honestscale.runners.instrument`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from honestscale.record import StepTimer, TargetNotReached


@dataclass
class Budget:
    """When training stops: the first criterion given decides; ``epochs`` is also the cap."""

    epochs: int
    warmup_steps: int
    eval_every: int = 1
    max_samples: int | None = None
    max_time: float | None = None
    target: float | None = None  # the target of the validation quality, reached per ``reached``
    target_metric: str = "accuracy"

    @classmethod
    def of(cls, args: Any, target: float | None, target_metric: str = "accuracy") -> Budget:
        """The budget a runner's options set (``add_training_args``'s names; a budget a runner does not offer is
        None), with the target of its quality."""
        return cls(
            epochs=args.epochs,
            warmup_steps=args.warmup_steps,
            eval_every=getattr(args, "eval_every", 1),
            max_samples=getattr(args, "max_samples", None),
            max_time=getattr(args, "max_time", None),
            target=target,
            target_metric=target_metric,
        )

    def evaluates(self, epoch: int, last: bool) -> bool:
        """Whether train and validation are evaluated after ``epoch``: every ``eval_every`` epochs, after the last
        one, and after every epoch while a target is to be reached."""
        return (epoch + 1) % self.eval_every == 0 or last or self.target is not None

    def spent(self, samples: int) -> bool:
        """The sample budget is spent after ``samples`` training samples (all replicas)."""
        return self.max_samples is not None and samples >= self.max_samples

    def criterion(self) -> tuple[str, float]:
        """run_start's stop criterion and value: what ends training as :meth:`Loop.run` decides it, the target
        first, then the sample and time budgets, else the epochs."""
        if self.target is not None:
            return "target_accuracy", float(self.target)
        if self.max_samples is not None:
            return "samples", float(self.max_samples)
        if self.max_time is not None:
            return "wall_time", float(self.max_time)
        return "epochs", float(self.epochs)


@dataclass
class Done:
    """What one optimizer step did on this rank: its loss (a tensor or a number; read once an epoch), the samples
    and tokens it processed, and when its exposed communication began (a clock mark) or how long it lasted."""

    loss: Any
    samples: int
    tokens: int | None = None
    comm_from: Any = None
    comm_s: float | None = None


@dataclass
class Outcome:
    reached: bool
    epochs: int  # epochs run
    steps: int


class Loop:
    """Runs the epochs. ``decide`` turns rank 0's flag into every rank's (a broadcast); ``replicas``: the
    data-parallel replicas whose samples add up to the global batch (the sample budget counts each once)."""

    def __init__(
        self,
        writer: Any,
        timer: StepTimer,
        budget: Budget,
        *,
        decide: Callable[[bool], bool],
        replicas: int,
        is_main: bool,
        mean_loss: Callable[[list[Any]], float | None],
    ) -> None:
        self.w = writer
        self.timer = timer
        self.budget = budget
        self.decide = decide
        self.replicas = replicas
        self.is_main = is_main
        self.mean_loss = mean_loss

    def run(
        self,
        epoch_batches: Callable[[int], Iterable[Any]],
        step: Callable[[Any], Done],
        evaluate: Callable[[int, bool], float | None],
        reached: Callable[[float], bool],
        test: Callable[[int], object],
        *,
        everyone_evaluates: bool = False,
    ) -> Outcome:
        """Train. ``evaluate(epoch, last)`` evaluates train and validation and returns the validation quality
        (None on a rank that has none); ``test(epoch)`` evaluates the held-out split once, at the end. With
        ``everyone_evaluates`` every rank calls them (a sharded or split model evaluates together), else rank 0
        alone."""
        b, w, timer = self.budget, self.w, self.timer
        started = time.perf_counter()
        n = samples_seen = 0
        got = False
        stop_now = False
        epoch = 0
        for epoch in range(b.epochs):
            t_epoch, losses, seen = time.perf_counter(), [], 0
            it: Iterator[Any] = iter(epoch_batches(epoch))
            try:
                while True:
                    timer.begin()
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    timer.mark("data")
                    done = step(batch)
                    extra = {"tokens": done.tokens} if done.tokens is not None else {}
                    for ready in timer.end(done.comm_from, comm_s=done.comm_s, epoch=epoch, step=n,
                                           samples=done.samples, warmup=n < b.warmup_steps, **extra):  # fmt: skip
                        w.step(**ready)
                    losses.append(done.loss)
                    seen += done.samples
                    n += 1
                    samples_seen += done.samples * self.replicas
                    if b.spent(samples_seen):
                        stop_now = True
                        break
                    # Ranks' clocks differ: they agree on the time limit every 10 steps (one small broadcast).
                    if (
                        b.max_time is not None
                        and n % 10 == 0
                        and self.decide(time.perf_counter() - started >= b.max_time)
                    ):
                        stop_now = True
                        break
            except BaseException:
                # the steps the timer holds are written before the run_stop that follows (a device that failed
                # cannot give its marks: those are lost with it)
                with suppress(Exception):
                    for ready in timer.flush():
                        w.step(**ready)
                raise
            for ready in timer.flush():
                w.step(**ready)
            w.epoch(
                epoch=epoch,
                train_loss=self.mean_loss(losses),
                samples=seen,
                t_total=time.perf_counter() - t_epoch,
            )
            last = epoch == b.epochs - 1 or stop_now
            if (everyone_evaluates or self.is_main) and b.evaluates(epoch, last):
                val = evaluate(epoch, last)
                got = b.target is not None and val is not None and reached(val)
            if self.decide(got) or stop_now:
                break
        if everyone_evaluates or self.is_main:
            test(epoch)  # held out: once, at the end, never used to stop or select
        got = self.decide(got)
        return Outcome(reached=got, epochs=epoch + 1, steps=n)


def check_target(outcome: Outcome, budget: Budget) -> None:
    """Raise :class:`TargetNotReached` (exit 3, run_stop ``aborted`` with the reason, as MLPerf says) when a target was set and
    missed."""
    if budget.target is not None and not outcome.reached:
        raise TargetNotReached(
            f"validation {budget.target_metric} never reached {budget.target:g} in {outcome.epochs} epochs"
        )
