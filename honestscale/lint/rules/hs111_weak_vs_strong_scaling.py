from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View, kind_words


def mixed(batches: dict[int, list[int]]) -> Said:
    return (
        "the batches are neither strong nor weak scaling and the runs share no quality target (mixed): "
        f"global batch {_batches_text(batches)}",
        "keep the global batch or the per-worker batch constant across scales, or train every run to one "
        "target (time to solution)",
    )


def not_declared(kind: str) -> Said:
    return (
        f"the kind of scaling is not declared (the series is {kind_words(kind)} scaling)",
        f'declare scaling = "{kind}" in the campaign (run_start scaling)',
    )


def declared_otherwise(
    declared: set[str], derived: str, batches: dict[int, list[int]], quality: str | None, kind: str
) -> Said:
    """The declared kind(s) against the kind the series is (``derived``: its batches, or time to solution)."""
    return (
        f"declared {'/'.join(sorted(map(kind_words, declared)))} scaling, but the series is "
        f"{kind_words(derived)} scaling (global batch {_batches_text(batches)}"
        + (f"; one target, {quality})" if quality else ")"),
        f'declare scaling = "{kind}", or change the batches to match what is claimed',
    )


def rates_across_batches(batches: dict[int, list[int]]) -> Said:
    return (
        "time to solution with a batch chosen per scale: its ratios of throughput and step time "
        f"compare different work per step (global batch {_batches_text(batches)}); its speedup of "
        "time to train is the measure",
        "quote the speedup and efficiency of the time to train, not of throughput",
    )


class WeakVsStrongScaling(Rule):
    """The declared kind of scaling must match the batches, and no ratio may compare different batches' work.

    What it checks: the kind of scaling the series shows (``honestscale.view.classify``: ``strong``, the same
    global batch at every scale; ``weak``, the same batch per data-parallel replica; ``time_to_solution``, every
    successful run trained to one quality target, metric and value, with a batch chosen per scale, as MLPerf
    does) equals the kind the runs declare (``scaling``; an MLPerf result declares time to solution by its
    benchmark's rules); an undeclared series cannot be verified. Batches that follow neither pattern and share no
    target (``mixed``) fail, and mark every ratio of the series. On a time-to-solution series the ratios of time to
    train and to accuracy are judged as any series' are: only its ratios of throughput, step time and per-worker
    rates across different batches fail, for they compare different work per step. Under a parallel layout
    (tensor, pipeline, hybrids) strong scaling keeps the global batch in tokens and weak scaling the tokens per
    data-parallel replica (dp x fsdp): the ranks of a tensor or pipeline group train one replica together.
    Why it misleads: weak scaling (growing the global batch with the workers) always looks better than
    strong scaling; presenting one as the other, or mixing them, hides which problem was solved; a throughput
    speedup across growing batches counts larger steps as faster ones (Hoefler 2018, "minibatch sizes: weak vs
    strong scaling").
    Example: "strong scaling to 16 GPUs" while the global batch grew from 832 to 3,328.
    Fix: declare scaling = "strong", "weak" or "time_to_solution" in the campaign and keep the batch (or the
    target) accordingly; quote the speedup of time to train of a time-to-solution series, and per-worker
    throughput for weak scaling.
    Reference: Hoefler 2018, rule 11; Hoefler & Belli, SC15, rule 6.
    """

    code = "HS111"
    name = "weak-vs-strong-scaling"
    severity = "error"
    summary = "the declared kind of scaling matches the batches"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions
    other_reaches = ("rate_ratios",)  # a time to solution's ratios of throughput across different batches

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        mode = target.classification
        if mode is None:
            return
        batches = {w: sorted({r.global_batch_size or 0 for r in rs}) for w, rs in target.by_workers().items()}
        declared = _declared(target.runs)
        derived = mode.name if mode.name == "time_to_solution" else mode.batches
        evidence: dict[str, Any] = {
            "mode": mode.name,
            "batches": mode.batches,
            "global_batch_by_workers": batches,
        }
        if mode.target:
            evidence["quality_target"] = mode.target
        if mode.name == "mixed":
            yield self.fail(
                target,
                target.runs,
                *mixed(batches),
                **evidence,
            )
            return
        if not declared:
            yield self.cannot_verify(
                target,
                target.runs,
                *not_declared(mode.name),
                **evidence,
            )
        elif not _agrees(declared, mode.name, mode.batches, mode.target):
            yield self.fail(
                target,
                target.runs,
                *declared_otherwise(declared, derived, batches, mode.target, mode.name),
                declared=sorted(declared),
                **evidence,
            )
        if mode.name == "time_to_solution" and mode.batches == "irregular":
            rated = sorted(
                w for w, rs in target.by_workers().items() if any(r.ok and r.throughput for r in rs)
            )
            if len(rated) >= 2 and len({tuple(batches[w]) for w in rated}) >= 2:
                yield replace(
                    self.fail(
                        target,
                        target.runs,
                        *rates_across_batches(batches),
                        **evidence,
                    ),
                    reach="rate_ratios",
                )


def _declared(runs: list[Run]) -> set[str]:
    """The kinds the runs declare; an MLPerf result declares time to solution by its benchmark's rules."""
    got = {str(r.scaling) for r in runs if r.scaling and r.scaling != "none"}
    if not got and runs and all(r.source == "mlperf" for r in runs):
        return {"time_to_solution"}
    return got


def _agrees(declared: set[str], kind: str, batches: str, target: str | None) -> bool:
    """Whether one declared kind is what the series is: strong and weak by the batches, time to solution by a
    shared target (whatever the batches)."""
    if len(declared) != 1:
        return False
    (said,) = declared
    if said == "time_to_solution":
        return target is not None
    return said in (batches, kind)


def _batches_text(batches: dict[int, list[int]]) -> str:
    """``832 at 4, 1,664 at 8, 3,328 at 16`` workers."""
    return ", ".join(f"{'/'.join(f'{b:,}' for b in bs)} at {w}" for w, bs in batches.items()) + " workers"
