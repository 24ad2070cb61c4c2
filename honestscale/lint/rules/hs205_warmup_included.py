from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule
from honestscale.view import Comparison, Run, View

SLOW = 3.0  # a first step this many times slower than the median step is warm-up


class WarmupIncluded(Rule):
    """Warm-up steps (compilation, cache filling, allocator growth) must be marked and kept out of throughput.

    What it checks: runs with step events mark their warm-up steps (``warmup``), and none of the first
    three steps left unmarked is more than 3x slower than the run's median step. And a summary a tool printed
    over every iteration, warm-up included (DLLogger's ``[]`` rows in NVIDIA's DeepLearningExamples, kept by the
    importer in ``imported.summaries``), is named as such beside the steady rate of the same run's steps.
    Why it misleads: the first steps pay for graph compilation, cuDNN autotuning and memory allocation;
    counting them lowers throughput for short runs and raises it for long ones, so comparisons across run
    lengths or worker counts shift (Hoefler & Belli, SC15, rule 9 on warm-up and measurement setup).
    Example: 20-step benchmark runs whose first step takes 4 s of a 10 s total.
    Fix: mark the first steps as warm-up (honestscale runners do: --warmup-steps) and exclude them from
    throughput; report time to train separately, which includes them.
    Reference: Hoefler & Belli, SC15, rule 9.
    """

    code = "HS205"
    name = "warmup-included"
    severity = "warning"
    summary = "warm-up steps are marked and kept out of throughput"

    def targets(self, view: View) -> list[Comparison]:
        return [
            c for c in view.of_kind("config")
            if any((r.steps is not None and r.steps.steps) or _summaries(r) for r in c.runs)
        ]  # fmt: skip

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        summarised = [(r, got) for r in target.runs if (got := _summaries(r))]
        if summarised:
            said = "; ".join(
                f"{r.id}: {', '.join(f'{k} {v:,.4g}' for k, v in got.items())} "
                + (f"(its steps after warm-up: {r.steady_rate:,.4g} samples/s)" if r.steady_rate else "")
                for r, got in summarised
            )
            yield self.fail(target, [r for r, _ in summarised],
                            f"the tool's summary rates average every iteration, warm-up included: {said}",
                            "report the rate of the steps after warm-up (honestscale's), not the tool's summary",
                            summaries={r.id: got for r, got in summarised})  # fmt: skip
        with_steps = [r for r in target.runs if r.steps is not None and r.steps.steps]
        slow = []
        for r in with_steps:
            s = r.steps
            assert s is not None
            if s.first_unmarked_max_s and s.median_step_s and s.first_unmarked_max_s > SLOW * s.median_step_s:
                slow.append((r, s.first_unmarked_max_s / s.median_step_s))
        if slow:
            worst = max(ratio for _, ratio in slow)
            yield self.fail(target, [r for r, _ in slow],
                            f"unmarked first steps up to {worst:.1f}x slower than the median step are counted",
                            "mark the first steps as warm-up (warmup: true in step events)",
                            worst_ratio=round(worst, 2))  # fmt: skip
            return
        unmarked = [r for r in with_steps if r.steps is not None and r.steps.warmup_marked == 0]
        if unmarked:
            yield self.cannot_verify(target, unmarked, "the steps do not say which are warm-up",
                                     "record warmup true/false in step events")  # fmt: skip


def _summaries(run: Run) -> dict[str, float]:
    """The rates of a tool's own summary over every iteration, warm-up included (``imported.summaries``)."""
    imported = run.attrs.get("imported")
    got = imported.get("summaries") if isinstance(imported, dict) else None
    if not isinstance(got, dict) or not got.get("includes_warmup"):
        return {}
    rates = got.get("rates")
    return (
        {str(k): float(v) for k, v in rates.items() if isinstance(v, int | float)}
        if isinstance(rates, dict)
        else {}
    )
