from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def staged_inputs(kinds: list[str]) -> Said:
    """Inputs synthetic or staged in memory, so the measurement holds no I/O."""
    return (
        f"inputs are {' / '.join(kinds)}: I/O is not part of the measurement",
        "read the real dataset from the filesystem the users will use",
    )


NO_DATA_TIME: Said = (
    "the step events record no data time (the recorder could not "
    "see the loader, as in Keras fit): I/O cannot be told from compute",
    "time the loader as the step's data phase (honestscale.record: s.phase('data'); the runners do)",
)
NO_STEP_EVENTS: Said = (
    "the runs record no step events, so no data time: I/O cannot be told from compute",
    "record a step event with t_data per training step "
    "(honestscale's runners do); for an MLPerf log, the submission's own profile",
)
SOURCE_UNKNOWN: Said = (
    "the runs do not say where their data came from",
    "record data_source (filesystem, in_memory, synthetic) in run_start",
)


class IoNotConsidered(Rule):
    """Training time must include reading the data: no synthetic or memory-staged inputs, a data part per step.

    What it checks: runs read real data from a filesystem (``data_source = "filesystem"``), not
    ``synthetic`` or ``in_memory``; and their step events carry a data (I/O and preprocessing) time. Runs without
    step events (an MLPerf log records none), or whose steps leave the data time unknown (a callback that cannot see
    the loader, as in Keras ``fit``), cannot be verified: nothing tells their I/O from their compute.
    Why it misleads: synthetic inputs or a dataset staged in memory remove the I/O that bounds real
    training at scale; the reported throughput cannot be reached on a cluster's shared filesystem
    (Hoefler 2018, "do not consider I/O").
    Example: images/s measured with synthetic tensors on 256 GPUs that would starve reading ImageNet.
    Fix: train from the real dataset on the filesystem the users will use; record data time per step.
    Reference: Hoefler 2018, rule 6.
    """

    code = "HS106"
    name = "io-not-considered"
    old_names = ("do-not-consider-io",)  # until 0.2: an imperative, not the bad practice
    severity = "warning"
    summary = "inputs come from a filesystem and steps record their data time"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        staged = [r for r in target.runs if r.data_source in ("synthetic", "in_memory")]
        if staged:
            kinds = sorted({str(r.data_source) for r in staged})
            yield self.fail(target, staged, *staged_inputs(kinds), data_source=kinds)
            return
        no_data = [
            r for r in target.runs if r.steps is not None and r.steps.steps and not r.steps.steps_with_data
        ]
        if no_data:
            yield self.cannot_verify(target, no_data, *NO_DATA_TIME)
            return
        no_steps = [r for r in target.runs if r.steps is None or not r.steps.steps]
        if no_steps:
            yield self.cannot_verify(target, no_steps, *NO_STEP_EVENTS)
            return
        unknown = [r for r in target.runs if r.data_source is None]
        if unknown:
            yield self.cannot_verify(target, unknown, *SOURCE_UNKNOWN)
