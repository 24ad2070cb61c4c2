"""Blocks of two kinds, alternating in one run: what the overhead benchmarks share.

Drift of a shared machine (other jobs, frequency, caches) hits both kinds alike when their blocks alternate; a
warm-up block of each kind runs first and is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks._results import Figure


def alternate(block: Callable[[bool], float], blocks: int, seed: int = 0) -> tuple[list[float], list[float]]:
    """``blocks`` results of ``block(False)`` (plain) and of ``block(True)`` (instrumented): a pair of blocks at a
    time, which goes first drawn at random (seeded), so that a machine speeding up or slowing down through a pair
    favours neither kind (with a fixed order it would favour the one that runs first, every time)."""
    import random

    rng = random.Random(seed)
    block(False)  # warm-up, not counted
    block(True)
    plain: list[float] = []
    instrumented: list[float] = []
    for _ in range(blocks):
        first = rng.random() < 0.5
        a, b = block(first), block(not first)
        plain.append(b if first else a)
        instrumented.append(a if first else b)
    return plain, instrumented


@dataclass(frozen=True)
class Paired:
    """What alternating blocks measured: per block pair (a plain block and the instrumented one after it) the ratio
    of their step times and the difference, each as the median over the pairs with a 95 % percentile bootstrap
    interval over the pairs (the project's own resampling, ``analysis.stats.resampled``)."""

    ratio: float
    ratio_low: float
    ratio_high: float
    cost_us: float  # the instrumentation's cost a step, microseconds
    cost_low_us: float
    cost_high_us: float
    pairs: tuple[float, ...]

    def line(self) -> str:
        return (
            f"ratio instrumented/plain: {self.ratio:.4f}, 95 % interval {self.ratio_low:.4f}-{self.ratio_high:.4f} "
            f"(bootstrap over {len(self.pairs)} block pairs; pairs {min(self.pairs):.3f}-{max(self.pairs):.3f})\n"
            f"cost a step: {self.cost_us:.1f} us, 95 % interval {self.cost_low_us:.1f}-{self.cost_high_us:.1f} us"
        )


def paired(plain: Sequence[float], instrumented: Sequence[float], seed: int = 0) -> Paired:
    """The pairs' ratios and differences of ``alternate``'s blocks (seconds a step)."""
    import numpy as np

    from honestscale.analysis.stats import BOOTSTRAP, resampled

    ratios = [q / p for p, q in zip(plain, instrumented, strict=True)]
    costs = [(q - p) * 1e6 for p, q in zip(plain, instrumented, strict=True)]
    rng = np.random.default_rng(seed)
    r = resampled(ratios, "median", BOOTSTRAP, rng)
    c = resampled(costs, "median", BOOTSTRAP, rng)
    return Paired(
        float(np.median(ratios)), float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5)),
        float(np.median(costs)), float(np.percentile(c, 2.5)), float(np.percentile(c, 97.5)),
        tuple(ratios),
    )  # fmt: skip


def overhead_figures(benchmark: str, what: str, got: Paired, goal: float, step_ms: float) -> list[Figure]:
    """The figures an overhead benchmark records: the upper bound of its ratio's interval (what the goal is about)
    and the cost a step in µs (what shows the overhead where steps are long enough to hide it below the noise)."""
    return [
        Figure(benchmark, f"{what}: instrumented / plain step time, upper 95 % bound", got.ratio_high, "x",
               (got.ratio_high - got.ratio_low) / 2, "lower", f"<= {goal}",
               f"median of {len(got.pairs)} block pairs {got.ratio:.4f} ({got.ratio_low:.4f}-{got.ratio_high:.4f}) "
               f"at {step_ms:.2f} ms steps"),
        Figure(benchmark, f"{what}: cost a step", got.cost_us, "us", (got.cost_high_us - got.cost_low_us) / 2,
               "lower", "", f"95 % interval {got.cost_low_us:.1f}-{got.cost_high_us:.1f} us"),
    ]  # fmt: skip
