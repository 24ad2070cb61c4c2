from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule
from honestscale.view import Comparison, View


class WeakVsStrongScaling(Rule):
    """The declared scaling mode must match the batches: strong keeps the global batch, weak the per-worker batch.

    What it checks: the scaling the batches of the series show (``strong``: same global batch at every scale;
    ``weak``: same batch per worker) equals the scaling the runs declare; batches that follow neither fail;
    an undeclared series cannot be verified. The finding gives the series' classification, the one every
    output prints (``honestscale.view.classify``): a per-worker batch with every run trained to one target
    (MLPerf) is ``mixed``, weak by batch on a fixed problem. Under a parallel layout (tensor, pipeline, hybrids)
    strong scaling keeps the global batch in tokens and weak scaling the tokens per data-parallel replica
    (dp x fsdp): the ranks of a tensor or pipeline group train one replica together.
    Why it misleads: weak scaling (growing the global batch with the workers) always looks better than
    strong scaling; presenting one as the other, or mixing them, hides which problem was solved
    (Hoefler 2018, "minibatch sizes: weak vs strong scaling").
    Example: "strong scaling to 16 GPUs" while the global batch grew from 832 to 3,328.
    Fix: declare scaling = "strong" or "weak" in the campaign and keep the batch accordingly; report
    per-worker throughput for weak scaling.
    Reference: Hoefler 2018, rule 11; Hoefler & Belli, SC15, rule 6.
    """

    code = "HS111"
    name = "weak-vs-strong-scaling"
    severity = "error"
    summary = "the declared scaling mode matches the batches"

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        mode = target.classification
        if mode is None:
            return
        derived = mode.batches
        batches = {w: sorted({r.global_batch_size or 0 for r in rs}) for w, rs in target.by_workers().items()}
        declared = {r.scaling for r in target.runs if r.scaling and r.scaling != "none"}
        said = f"{mode.name} scaling" + (
            " (weak by batch, every run to one target)" if mode.name != derived and derived == "weak" else ""
        )
        evidence = {"mode": mode.name, "batches": derived, "global_batch_by_workers": batches}
        if derived == "irregular":
            yield self.fail(
                target,
                target.runs,
                "the batches are neither strong nor weak scaling (mixed)",
                "keep either the global batch or the per-worker batch constant across scales",
                **evidence,
            )
        elif not declared:
            yield self.cannot_verify(
                target,
                target.runs,
                f"the scaling mode is not declared (the series is {said})",
                f'declare scaling = "{derived}" in the campaign (run_start scaling)',
                **evidence,
            )
        elif declared != {derived}:
            yield self.fail(
                target,
                target.runs,
                f"declared {'/'.join(sorted(map(str, declared)))} scaling, "
                f"but the batches are {derived} scaling",
                f'declare scaling = "{derived}", or change the batches to match what is claimed',
                declared=sorted(map(str, declared)),
                **evidence,
            )
