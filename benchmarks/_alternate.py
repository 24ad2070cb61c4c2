"""Blocks of two kinds, alternating in one run: what the overhead benchmarks share.

Drift of a shared machine (other jobs, frequency, caches) hits both kinds alike when their blocks alternate; a
warm-up block of each kind runs first and is not counted.
"""

from __future__ import annotations

from collections.abc import Callable


def alternate(block: Callable[[bool], float], blocks: int) -> tuple[list[float], list[float]]:
    """``blocks`` results of ``block(False)`` (plain) and of ``block(True)`` (instrumented), alternating."""
    block(False)  # warm-up, not counted
    block(True)
    plain: list[float] = []
    instrumented: list[float] = []
    for i in range(2 * blocks):
        (instrumented if i % 2 else plain).append(block(bool(i % 2)))
    return plain, instrumented
