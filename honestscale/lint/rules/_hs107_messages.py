"""What HS107 (highest-ops-numbers) says, apart from when it says it: each finding's message and fix as a small
function of the numbers it names (as ruff's ``message()`` beside a violation), so the rule's conditions read alone."""

from __future__ import annotations

from honestscale.analysis import flops
from honestscale.analysis.flops import Claims, Utilisation
from honestscale.catalogue import peaks
from honestscale.lint._engine import Said
from honestscale.view import Run

TOLERANCE = 0.05  # a claim further than this (relative) from the recomputed value is wrong

CAUSES = (
    "a wrong peak (another card's, a sparse or non-tensor one, one halved twice), a shard-only parameter count "
    "(fms-fsdp issue 67), a rank-0 rate times the world size (Lightning's Throughput), tokens counted once per "
    "tensor-parallel rank (trl issue 7100), or another FLOPs convention"
)
FIX = (
    "report MFU as honestscale recomputes it (every rank's tokens, each replica's once; the full model's "
    "parameters; the table's dense peak of this accelerator and data type; the convention named), or correct the "
    "tool's peak, parameter count and token count"
)
SHARD_FIX = (
    "record the whole model's parameters in params_total (an FSDP model's numel() counts the local shard: sum "
    "over the shards, or count before wrapping)"
)


def pct(x: float | None) -> str:
    return "cannot verify" if x is None else f"{100 * x:.1f} %"


def g(x: float | None) -> str:
    return "cannot verify" if x is None else f"{x:,.1f}"


def peak_text(u: Utilisation) -> str:
    if u.peak.tflops is None:
        return f"{u.convention}, no peak"
    return f"{u.convention}, {u.peak.tflops:,.1f} TFLOP/s dense {u.peak.dtype}, table {peaks.version()}"


def peak_cause(run: Run, c: Claims) -> str:
    if c.peak_tflops is None:
        return ""
    kind, what = flops.claimed_peak(run, c.peak_tflops)
    return f"; it divided by {c.peak_tflops:g} TFLOP/s" + (f", {what}" if what and kind != "dense" else "")


def no_time_to_solution() -> Said:
    return (
        "rates or throughput budgets reported without any time to solution",
        "train the same configuration to the target accuracy (or planned epochs) and report its time",
    )


def mixed_conventions(got: dict[str, list[str]], spread: str) -> Said:
    named = "; ".join(f"{k} ({', '.join(sorted(v))})" for k, v in sorted(got.items()))
    ours = f"{flops.DEFAULT_CONVENTION}, {flops.CONVENTIONS[flops.DEFAULT_CONVENTION]}"
    return (
        f"MFUs of different FLOPs conventions compared: {named}{spread}",
        f"recompute every MFU under one named convention (honestscale's: {ours}) before comparing them",
    )


def shard_only(run: str, sp: flops.ShapeParams, shape: Utilisation, counted: Utilisation) -> Said:
    """A recorded parameter count too small for the recorded shape: which count HS107 trusted, and why."""
    return (
        f"{run}: a shard-only parameter count: {sp.describe()}; HS107 trusts model_shape (no whole model of "
        f"that shape has fewer): MFU at least {pct(shape.mfu)} from the shape, {pct(counted.mfu)} from {sp.field} "
        "(fms-fsdp issue 67)",
        SHARD_FIX,
    )


def recomputed_over_100(run: str, u: Utilisation) -> Said:
    return (
        f"{run}: recomputed MFU {pct(u.mfu)} is over 100 % ({peak_text(u)}): the peak or the counts are wrong",
        "check the declared peak and the recorded counts",
    )


def claimed_over_100(run: Run, c: Claims, u: Utilisation) -> Said:
    return (
        f"{run.id}: claimed MFU {pct(c.mfu)} is over 100 %; recomputed {pct(u.mfu)} ({peak_text(u)})"
        f"{peak_cause(run, c)}",
        FIX,
    )


def not_the_dense_peak(run: str, peak: float, what: str, c: Claims, u: Utilisation) -> Said:
    return (
        f"{run}: the claim divides by {peak:g} TFLOP/s, {what}; dense: {g(u.peak.tflops)} "
        f"(MFU claimed {pct(c.mfu)}, recomputed {pct(u.mfu)})",
        "divide by the dense tensor-core peak of the accelerator in the compute data type "
        f"(peak table version {peaks.version()})",
    )


def total_as_per_accelerator(run: str, c: Claims, u: Utilisation, n: int) -> Said:
    return (
        f"{run}: the claimed per-accelerator rate {g(c.tokens_per_s_per_accelerator)} tokens/s is the total "
        f"({g(c.tokens_per_s)}) on {n} accelerators; recomputed per accelerator {g(u.tokens_per_s_per_accelerator)}",
        "divide the total by the accelerators in use",
    )


def no_peak(run: Run, c: Claims, u: Utilisation) -> Said:
    claimed = f" (claimed {pct(c.mfu)})" if c.mfu is not None else ""
    return (
        f"{run.id}: MFU against no peak: {u.peak.missing}{claimed}{peak_cause(run, c)}; never another card's peak",
        u.peak.record,
    )


def no_counts(run: str, c: Claims, u: Utilisation) -> Said:
    missing = ", ".join(u.missing)
    return (
        f"{run}: the claimed MFU {pct(c.mfu)} cannot be recomputed: {missing} not recorded",
        f"record {missing} in run_start and the step events",
    )


def foreign_convention(run: str, c: Claims, u: Utilisation) -> Said:
    return (
        f"{run}: the claimed FLOPs ({c.flops_convention}) are counted by a convention honestscale does not compute "
        f"({', '.join(flops.CONVENTIONS)}): its MFU or TFLOP/s cannot be compared with the recomputed "
        f"{g(u.tflops_per_accelerator)} TFLOP/s ({u.convention})",
        "compare MFUs of one named convention only (honestscale's recomputed MFU), or record the tool's FLOPs per "
        "token (`flops_per_token`) beside its name",
    )


def hfu_as_mfu(run: Run, c: Claims, u: Utilisation) -> Said:
    return (
        f"{run.id}: HFU presented as MFU: claimed MFU {pct(c.mfu)} is the recomputed HFU {pct(u.hfu)} "
        f"({run.activation_checkpointing} activation recomputation); MFU is {pct(u.mfu)} ({u.convention})",
        "report MFU from model FLOPs (the recomputed forward passes are not the model's work) and HFU beside it, "
        "named",
    )


def mfu_apart(c: Claims, u: Utilisation) -> str:
    return f"claimed MFU {pct(c.mfu)} vs recomputed {pct(u.mfu)}"


def tflops_apart(c: Claims, u: Utilisation) -> str:
    return f"claimed {c.tflops_per_accelerator:,.1f} TFLOP/s per accelerator vs recomputed {g(u.tflops_per_accelerator)}"


def tokens_apart(c: Claims, u: Utilisation) -> str:
    return f"claimed {g(c.tokens_per_s)} tokens/s vs recomputed {g(u.tokens_per_s)}"


def tokens_per_accelerator_apart(c: Claims, u: Utilisation) -> str:
    return (
        f"claimed {g(c.tokens_per_s_per_accelerator)} tokens/s per accelerator vs recomputed "
        f"{g(u.tokens_per_s_per_accelerator)}"
    )


def claims_apart(run: str, said: list[str], u: Utilisation, causes: list[str]) -> Said:
    why = "likely cause: " + "; ".join(causes) if causes else "likely causes: " + CAUSES
    return (
        f"{run}: {'; '.join(said)} ({peak_text(u)}): more than {100 * TOLERANCE:.0f} % apart; {why}",
        FIX,
    )


def wrong_peak_cause(peak: float, what: str, u: Utilisation) -> str:
    return (
        f"a wrong peak: {peak:g} TFLOP/s"
        + (f" is {what}" if what else "")
        + f"; the table's dense {u.peak.dtype} peak is {g(u.peak.tflops)}"
    )


def shard_cause(sp: flops.ShapeParams) -> str:
    return (
        f"a shard-only parameter count: {sp.field} {sp.recorded:,} non-embedding is 1/"
        f"{sp.from_shape / sp.recorded:.1f} of what model_shape gives (fms-fsdp issue 67)"
    )


def claimed_shard_cause(claimed: int, total: int) -> str:
    return (
        f"a shard-only parameter count: claims.params {claimed:,} is 1/{total / claimed:.1f} of params_total "
        f"{total:,} (fms-fsdp issue 67: an FSDP model's numel() counts the local shard)"
    )


def per_tp_rank_cause(c: Claims, u: Utilisation, tp: int) -> str:
    return (
        f"tokens counted once per tensor-parallel rank: claimed {g(c.tokens_per_s)} tokens/s is {tp} x the "
        f"{g(u.tokens_per_s)} every rank's counts give (trl issue 7100)"
    )


def rank_zero_cause(c: Claims, u: Utilisation, world: int | None) -> str:
    return (
        f"rank 0's rate times the world size: claimed {g(c.tokens_per_s)} tokens/s is what rank 0's steps x "
        f"{world} give; every rank's counts give {g(u.tokens_per_s)} (Lightning's Throughput)"
    )


def tokens_cause(c: Claims, u: Utilisation) -> str:
    return f"claimed {g(c.tokens_per_s)} tokens/s; every rank's counts give {g(u.tokens_per_s)}"
