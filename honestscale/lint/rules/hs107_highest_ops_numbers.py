from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from honestscale.analysis import flops
from honestscale.analysis.flops import Claims, MfuSummary, Utilisation, off
from honestscale.analysis.points import DO_NOT_QUOTE
from honestscale.catalogue import peaks
from honestscale.lint._engine import Finding, Rule
from honestscale.view import Comparison, Run, View

RATE_WORDS = ("flop", "ops", "tops")
TOLERANCE = 0.05  # a claim further than this (relative) from the recomputed value is wrong
SAME = 0.01  # a per-accelerator rate this close to the total is the total
# run_start fields that name FLOPs without being a rate
NOT_RATES = ("peak_tflops", "flops_per_token", "declared_peak", "model_shape")
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


def _pct(x: float | None) -> str:
    return "cannot verify" if x is None else f"{100 * x:.1f} %"


def _g(x: float | None) -> str:
    return "cannot verify" if x is None else f"{x:,.1f}"


class HighestOpsNumbers(Rule):
    """A rate (FLOP/s, ops/s, samples/s, MFU) must stand beside the time to solution, and be what the counts give.

    What it checks: when runs report an operation rate (an evaluation metric or run_start field naming FLOP/s or
    ops, a claimed MFU), or were stopped on a sample or time budget (throughput measurements), at least one run of
    the configuration trained to a solution: it reached its target accuracy or its planned epochs, with a time to
    train. And the MFU/TFLOP/s audit (``analysis/flops.py``): MFU is recomputed from every rank's token counts,
    the parameter counts, ``model_shape`` and the sequence length under a named convention (palm: 6N + 12·L·d·T;
    megatron: attention halved), against the dense peak of the accelerator in the run's compute data type from the
    versioned, cited peak table (``catalogue/peaks.toml``). It fails an MFU over 100 % (recomputed or claimed) as an
    error, a number no machine produces, marked "do not quote" wherever it is shown; a parameter count below half
    of what ``model_shape`` gives (``analysis/flops.SHAPE_CONVENTION``, a lower bound: a shard's count, not the
    model's), and then trusts the shape and says so; a
    claimed peak that is the accelerator's sparse ("with sparsity") or non-tensor-core one; a claimed MFU or TFLOP/s
    per accelerator (run_start ``claims``) more than 5 % from the recomputed one, naming the likely cause; HFU
    presented as MFU (activations recomputed and the claim matches the hardware FLOPs); MFUs of different
    conventions in one comparison; a per-accelerator rate that equals the total. An accelerator without a peak in
    the table and without a declared one (a CPU run), or a run without the counts, is *cannot verify*, with what to
    record; never another card's peak. A claim counted by a convention honestscale does not compute (Megatron-LM's,
    which adds the logits layer) is *cannot verify* too, never failed for the convention alone.
    Why it misleads: the highest FLOP/s often come from settings (huge batches, low precision, no I/O) that train
    slower to the same accuracy; rates without time to solution reward the wrong thing (Hoefler 2018, "report
    highest ops numbers"). And MFU is the number most often wrong in public: an unknown GPU falling back to the
    A100's 312 TFLOP/s gives 563 % on MI355X (AMD-AGI/Primus PR 772) and 152 % on MI350X (torchtitan PR 4779);
    sparse datasheet peaks halve it (Lightning issue 21677); a dense peak halved twice doubles it (OLMo-core PR
    614); an FSDP model's ``numel()`` counts one shard (fms-fsdp issue 67); tensor-parallel ranks each count the
    same tokens (trl issue 7100); rank 0's rate times the world hides the stragglers (Lightning's Throughput).
    Example: "312 TFLOP/s sustained" for a configuration that never reached the target accuracy; "MFU 563 %" on
    an MI355X, divided by the A100's peak (recomputed against the MI355X's 2,516.6: 69.8 %).
    Fix: report time to accuracy (or to the planned epochs) first and the rate as an explanation of it; report
    MFU as recomputed here (the convention named, the table's dense peak), record ``declared_peak`` (tflops,
    dtype, source) for an accelerator the table lacks, and correct the tool's peak, parameter and token counts.
    Reference: Hoefler 2018, rule 7; Chowdhery et al. 2022 (PaLM), appendix B (MFU); Korthikanti et al. 2022
    (selective recomputation, HFU).
    """

    code = "HS107"
    name = "highest-ops-numbers"
    severity = "warning"
    summary = (
        "operation rates are reported beside a time to solution, and MFU claims are what the counts give"
    )

    def targets(self, view: View) -> list[Comparison]:
        configs = [
            c for c in view.of_kind("config") if any(_reports_rate(r) or flops.audited(r) for r in c.runs)
        ]
        mixed = [c for c in view.of_kind("scaling", "framework", "hardware", "layout")
                 if len(flops.conventions_claimed(c.runs)) > 1]  # fmt: skip
        return configs + mixed

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        yield from self._conventions(target)
        if target.kind != "config":
            return
        rate_runs = [r for r in target.runs if _reports_rate(r)]
        solved = [r for r in target.runs if r.ok and r.stop_criterion in ("target_accuracy", "epochs")
                  and r.time_to_train_s is not None]  # fmt: skip
        if rate_runs and not solved:
            yield self.fail(
                target,
                rate_runs,
                "rates or throughput budgets reported without any time to solution",
                "train the same configuration to the target accuracy (or planned epochs) and report its time",
                stop_criteria=sorted({str(r.stop_criterion) for r in rate_runs}),
            )
        audited = [r for r in target.runs if flops.audited(r)]
        summary = flops.mfu_over(audited)
        yield from _merged([f for run in audited for f in self._audit(target, run, view, summary)])

    def _conventions(self, target: Comparison) -> Iterator[Finding]:
        got = flops.conventions_claimed(target.runs)
        if len(got) < 2:
            return
        runs = [r for r in target.runs if any(r.id in ids for ids in got.values())]
        spread = ""
        c = next((c for r in runs if (c := flops.counts(r)[0]) is not None), None)
        if c is not None:
            p, m = flops.model_flops(c, "palm"), flops.model_flops(c, "megatron")
            spread = f"; for this model at {c.sequence:,} tokens of context they differ by {100 * (p / m - 1):.1f} %"
        yield self.fail(
            target, runs,
            "MFUs of different FLOPs conventions compared: " + "; ".join(f"{k} ({', '.join(sorted(v))})"
                                                                          for k, v in sorted(got.items())) + spread,
            "recompute every MFU under one named convention (honestscale's: " + flops.DEFAULT_CONVENTION + ", "
            + flops.CONVENTIONS[flops.DEFAULT_CONVENTION] + ") before comparing them",
            conventions=got,
        )  # fmt: skip

    def _audit(
        self, target: Comparison, run: Run, view: View, summary: MfuSummary | None
    ) -> Iterator[Finding]:
        c = flops.claims_of(run)
        sp = flops.shape_params(run)
        shard = sp is not None and sp.shard_only
        u = flops.utilisation(run)
        ev: dict[str, Any] = {
            "run": run.id,
            "recomputed": u.as_json(),
            "claims": _claims_json(c),
            "configuration": summary.describe() if summary else None,
            "parameters_trusted": "model_shape" if shard else "recorded",
        }
        peak_text = _peak_text(u)
        over = c.mfu is not None and c.mfu > 1
        if sp is not None and sp.shard_only:
            counted = flops.utilisation(run, trust_shape=False)
            yield self.fail(target, [run], _shard_message(run.id, sp, u, counted), _SHARD_FIX, **ev)
        if u.mfu is not None and u.mfu > 1:
            yield _impossible(
                self.fail(
                    target,
                    [run],
                    f"{run.id}: recomputed MFU {_pct(u.mfu)} is over 100 % "
                    f"({peak_text}): the peak or the counts are wrong",
                    "check the declared peak and the recorded counts",
                    **ev,
                )
            )
        if over:
            yield _impossible(
                self.fail(
                    target,
                    [run],
                    f"{run.id}: claimed MFU {_pct(c.mfu)} is over 100 %; "
                    f"recomputed {_pct(u.mfu)} ({peak_text}){_peak_cause(run, c)}",
                    FIX,
                    **ev,
                )
            )
        if c.peak_tflops is not None:
            kind, what = flops.claimed_peak(run, c.peak_tflops)
            if kind in ("sparse", "vector"):
                yield self.fail(target, [run], f"{run.id}: the claim divides by {c.peak_tflops:g} TFLOP/s, {what}; "
                                f"dense: {_g(u.peak.tflops)} (MFU claimed {_pct(c.mfu)}, recomputed {_pct(u.mfu)})",
                                "divide by the dense tensor-core peak of the accelerator in the compute data type "
                                f"(peak table version {peaks.version()})", **ev)  # fmt: skip
        n = u.accelerators or 0
        if n > 1 and c.tokens_per_s and (o := off(c.tokens_per_s_per_accelerator, c.tokens_per_s)) is not None \
                and o <= SAME:  # fmt: skip
            yield self.fail(target, [run], f"{run.id}: the claimed per-accelerator rate "
                            f"{_g(c.tokens_per_s_per_accelerator)} tokens/s is the total ({_g(c.tokens_per_s)}) on "
                            f"{n} accelerators; recomputed per accelerator {_g(u.tokens_per_s_per_accelerator)}",
                            "divide the total by the accelerators in use", **ev)  # fmt: skip
        if u.peak.tflops is None and (c.any or u.flops_per_token is not None):
            yield self.cannot_verify(target, [run], f"{run.id}: MFU against no peak: {u.peak.missing}"
                                     + (f" (claimed {_pct(c.mfu)})" if c.mfu is not None else "")
                                     + f"{_peak_cause(run, c)}; never another card's peak",
                                     u.peak.record, **ev)  # fmt: skip
        elif c.any and (u.flops_per_token is None or u.tokens_per_s is None):
            yield self.cannot_verify(target, [run], f"{run.id}: the claimed MFU {_pct(c.mfu)} cannot be recomputed: "
                                     f"{', '.join(u.missing)} not recorded", "record " + ", ".join(u.missing)
                                     + " in run_start and the step events", **ev)  # fmt: skip
        yield from self._claims(target, run, view, c, u, ev, skip_mfu=over)

    def _claims(self, target: Comparison, run: Run, view: View, c: Claims, u: Utilisation, ev: dict[str, Any],
                skip_mfu: bool) -> Iterator[Finding]:  # fmt: skip
        # the claim's own convention, or either where it names none
        under = [u] if c.convention else [u, *[flops.utilisation(run, k) for k in flops.CONVENTIONS
                                               if k != u.convention]]  # fmt: skip
        said: list[str] = []
        foreign = bool(c.flops_convention) and c.convention is None  # a FLOPs count honestscale does not make
        if foreign and (c.mfu is not None or c.tflops_per_accelerator is not None):
            yield self.cannot_verify(
                target, [run], f"{run.id}: the claimed FLOPs ({c.flops_convention}) are counted by a convention "
                f"honestscale does not compute ({', '.join(flops.CONVENTIONS)}): its MFU or TFLOP/s cannot be "
                f"compared with the recomputed {_g(u.tflops_per_accelerator)} TFLOP/s ({u.convention})",
                "compare MFUs of one named convention only (honestscale's recomputed MFU), or record the tool's "
                "FLOPs per token (`flops_per_token`) beside its name", **ev)  # fmt: skip
        if (not foreign and c.mfu is not None and not skip_mfu and u.mfu is not None
                and min(off(c.mfu, x.mfu) or 0.0 for x in under) > TOLERANCE):  # fmt: skip
            if (
                run.activation_checkpointing in ("full", "selective")
                and (off(c.mfu, u.hfu) or 1) <= TOLERANCE
            ):
                yield self.fail(target, [run], f"{run.id}: HFU presented as MFU: claimed MFU {_pct(c.mfu)} is the "
                                f"recomputed HFU {_pct(u.hfu)} ({run.activation_checkpointing} activation "
                                f"recomputation); MFU is {_pct(u.mfu)} ({u.convention})",
                                "report MFU from model FLOPs (the recomputed forward passes are not the model's "
                                "work) and HFU beside it, named", **ev)  # fmt: skip
            else:
                said.append(f"claimed MFU {_pct(c.mfu)} vs recomputed {_pct(u.mfu)}")
        if not foreign and c.tflops_per_accelerator is not None and u.tflops_per_accelerator is not None:
            near = [off(c.tflops_per_accelerator, t) for x in under
                    for t in (x.tflops_per_accelerator, x.hardware_tflops_per_accelerator)]  # fmt: skip
            if min(o for o in near if o is not None) > TOLERANCE:
                said.append(f"claimed {c.tflops_per_accelerator:,.1f} TFLOP/s per accelerator vs recomputed "
                            f"{_g(u.tflops_per_accelerator)}")  # fmt: skip
        # a rate claimed on its own (no MFU beside it) is checked too: tokens/s, and per accelerator
        if (o := off(c.tokens_per_s, u.tokens_per_s)) is not None and o > TOLERANCE:
            said.append(f"claimed {_g(c.tokens_per_s)} tokens/s vs recomputed {_g(u.tokens_per_s)}")
        total_as_per = (u.accelerators or 0) > 1 and (
            off(c.tokens_per_s_per_accelerator, c.tokens_per_s) or 1
        ) <= SAME
        per = off(c.tokens_per_s_per_accelerator, u.tokens_per_s_per_accelerator)
        if (
            per is not None and per > TOLERANCE and not total_as_per
        ):  # the total as per accelerator: failed above
            said.append(f"claimed {_g(c.tokens_per_s_per_accelerator)} tokens/s per accelerator vs recomputed "
                        f"{_g(u.tokens_per_s_per_accelerator)}")  # fmt: skip
        if not said:
            return
        causes = _causes(run, view, c, u)
        yield self.fail(target, [run], f"{run.id}: " + "; ".join(said) + f" ({_peak_text(u)}): more than "
                        f"{100 * TOLERANCE:.0f} % apart; " + ("likely cause: " + "; ".join(causes) if causes
                                                               else "likely causes: " + CAUSES), FIX,
                        **ev, causes=causes)  # fmt: skip


_SHARD_FIX = (
    "record the whole model's parameters in params_total (an FSDP model's numel() counts the local shard: sum "
    "over the shards, or count before wrapping)"
)


def _shard_message(run: str, sp: flops.ShapeParams, shape: Utilisation, counted: Utilisation) -> str:
    """A recorded parameter count too small for the recorded shape: which count HS107 trusted, and why."""
    return (
        f"{run}: a shard-only parameter count: {sp.describe()}; HS107 trusts model_shape (no whole model of "
        f"that shape has fewer): MFU at least {_pct(shape.mfu)} from the shape, {_pct(counted.mfu)} from {sp.field} "
        "(fms-fsdp issue 67)"
    )


def _impossible(finding: Finding) -> Finding:
    """An MFU over 100 % is a number no machine produces: an error, and every output marks it "do not quote"."""
    finding.severity = "error"
    finding.message = f"{DO_NOT_QUOTE}: {finding.message}"
    return finding


def _merged(found: list[Finding]) -> Iterator[Finding]:
    """One finding per problem of a configuration: the repetitions that say the same are named together."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in found:
        run = f.runs[0]
        groups.setdefault((f.outcome, f.message.replace(run, "{run}")), []).append(f)
    for (_, message), fs in groups.items():
        first = fs[0]
        runs = sorted({r for f in fs for r in f.runs})
        names = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
        who = runs[0] if len(runs) == 1 else f"{len(runs)} runs ({names})"
        text = message.replace("{run}", who, 1).replace("{run}", runs[0])
        yield Finding(first.code, first.severity, first.outcome, first.target, runs, text,
                      {**first.evidence, "runs": runs}, first.fix)  # fmt: skip


def _peak_text(u: Utilisation) -> str:
    if u.peak.tflops is None:
        return f"{u.convention}, no peak"
    return f"{u.convention}, {u.peak.tflops:,.1f} TFLOP/s dense {u.peak.dtype}, table {peaks.version()}"


def _peak_cause(run: Run, c: Claims) -> str:
    if c.peak_tflops is None:
        return ""
    kind, what = flops.claimed_peak(run, c.peak_tflops)
    return f"; it divided by {c.peak_tflops:g} TFLOP/s" + (f", {what}" if what and kind != "dense" else "")


def _causes(run: Run, view: View, c: Claims, u: Utilisation) -> list[str]:
    out = []
    if c.peak_tflops is not None:
        kind, what = flops.claimed_peak(run, c.peak_tflops)
        if kind != "dense":
            out.append(f"a wrong peak: {c.peak_tflops:g} TFLOP/s" + (f" is {what}" if what else "")
                       + f"; the table's dense {u.peak.dtype} peak is {_g(u.peak.tflops)}")  # fmt: skip
    if (sp := flops.shape_params(run)) is not None and sp.shard_only:
        out.append(
            f"a shard-only parameter count: {sp.field} {sp.recorded:,} non-embedding is 1/"
            f"{sp.from_shape / sp.recorded:.1f} of what model_shape gives (fms-fsdp issue 67)"
        )
    elif c.params and run.params_total and c.params < (1 - TOLERANCE) * run.params_total:
        out.append(f"a shard-only parameter count: claims.params {c.params:,} is 1/{run.params_total / c.params:.1f} "
                   f"of params_total {run.params_total:,} (fms-fsdp issue 67: an FSDP model's numel() counts the "
                   "local shard)")  # fmt: skip
    if (o := off(c.tokens_per_s, u.tokens_per_s)) is not None and o > TOLERANCE and u.tokens_per_s:
        ratio = (c.tokens_per_s or 0.0) / u.tokens_per_s
        tp = run.degrees["tp"] * run.degrees["cp"]
        zero = flops.rank_zero_extrapolated(run, view.rank_times.get(run.id))
        if tp > 1 and abs(ratio - tp) <= TOLERANCE * tp:
            out.append(f"tokens counted once per tensor-parallel rank: claimed {_g(c.tokens_per_s)} tokens/s is "
                       f"{tp} x the {_g(u.tokens_per_s)} every rank's counts give (trl issue 7100)")  # fmt: skip
        elif zero is not None and (off(c.tokens_per_s, zero) or 1) <= TOLERANCE:
            out.append(f"rank 0's rate times the world size: claimed {_g(c.tokens_per_s)} tokens/s is what rank 0's "
                       f"steps x {run.world_size} give; every rank's counts give {_g(u.tokens_per_s)} (Lightning's "
                       "Throughput)")  # fmt: skip
        else:
            out.append(
                f"claimed {_g(c.tokens_per_s)} tokens/s; every rank's counts give {_g(u.tokens_per_s)}"
            )
    return out


def _claims_json(c: Claims) -> dict[str, Any]:
    return {k: v for k, v in vars(c).items() if v is not None}


def _reports_rate(r: Run) -> bool:
    c = flops.claims_of(r)
    return (
        any(w in e.metric.lower() for e in r.evals for w in RATE_WORDS)
        or any(k not in NOT_RATES and ("flops" in k.lower() or "ops_per_s" in k.lower()) for k in r.attrs)
        or any(v is not None for v in (c.mfu, c.hfu, c.tflops_per_accelerator))
        or r.stop_criterion in ("samples", "wall_time")
    )
