from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from honestscale.analysis import flops
from honestscale.analysis.flops import Claims, MfuSummary, Utilisation, off
from honestscale.analysis.points import DO_NOT_QUOTE
from honestscale.lint._engine import Finding, Rule
from honestscale.lint.rules import _hs107_messages as say
from honestscale.lint.rules._hs107_messages import TOLERANCE
from honestscale.view import Comparison, Run, View

RATE_WORDS = ("flop", "ops", "tops")
SAME = 0.01  # a per-accelerator rate this close to the total is the total
# run_start fields that name FLOPs without being a rate
NOT_RATES = ("peak_tflops", "flops_per_token", "declared_peak", "model_shape")


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
        compared = view.of_kind("scaling", "framework", "hardware", "layout")
        return configs + [c for c in compared if len(flops.conventions_claimed(c.runs)) > 1]

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        yield from self._conventions(target)
        if target.kind != "config":
            return
        rate_runs = [r for r in target.runs if _reports_rate(r)]
        if rate_runs and not any(_solved(r) for r in target.runs):
            stopped = sorted({str(r.stop_criterion) for r in rate_runs})
            yield self.fail(target, rate_runs, *say.no_time_to_solution(), stop_criteria=stopped)
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
        yield self.fail(target, runs, *say.mixed_conventions(got, spread), conventions=got)

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
        over = c.mfu is not None and c.mfu > 1
        if sp is not None and sp.shard_only:
            counted = flops.utilisation(run, trust_shape=False)
            yield self.fail(target, [run], *say.shard_only(run.id, sp, u, counted), **ev)
        if u.mfu is not None and u.mfu > 1:
            yield _impossible(self.fail(target, [run], *say.recomputed_over_100(run.id, u), **ev))
        if over:
            yield _impossible(self.fail(target, [run], *say.claimed_over_100(run, c, u), **ev))
        if c.peak_tflops is not None:
            kind, what = flops.claimed_peak(run, c.peak_tflops)
            if kind in ("sparse", "vector"):
                yield self.fail(
                    target, [run], *say.not_the_dense_peak(run.id, c.peak_tflops, what, c, u), **ev
                )
        n = u.accelerators or 0
        if n > 1 and c.tokens_per_s and _same(c.tokens_per_s_per_accelerator, c.tokens_per_s):
            yield self.fail(target, [run], *say.total_as_per_accelerator(run.id, c, u, n), **ev)
        if u.peak.tflops is None and (c.any or u.flops_per_token is not None):
            yield self.cannot_verify(target, [run], *say.no_peak(run, c, u), **ev)
        elif c.any and (u.flops_per_token is None or u.tokens_per_s is None):
            yield self.cannot_verify(target, [run], *say.no_counts(run.id, c, u), **ev)
        yield from self._claims(target, run, view, c, u, ev, skip_mfu=over)

    def _claims(
        self,
        target: Comparison,
        run: Run,
        view: View,
        c: Claims,
        u: Utilisation,
        ev: dict[str, Any],
        skip_mfu: bool,
    ) -> Iterator[Finding]:
        # the claim's own convention, or either where it names none
        others = (
            []
            if c.convention
            else [flops.utilisation(run, k) for k in flops.CONVENTIONS if k != u.convention]
        )
        under = [u, *others]
        foreign = bool(c.flops_convention) and c.convention is None  # a FLOPs count honestscale does not make
        if foreign and (c.mfu is not None or c.tflops_per_accelerator is not None):
            yield self.cannot_verify(target, [run], *say.foreign_convention(run.id, c, u), **ev)
        mfu_apart = (
            not foreign
            and c.mfu is not None
            and not skip_mfu
            and u.mfu is not None
            and min(off(c.mfu, x.mfu) or 0.0 for x in under) > TOLERANCE
        )
        hfu = mfu_apart and run.activation_checkpointing in ("full", "selective") and _near(c.mfu, u.hfu)
        if hfu:
            yield self.fail(target, [run], *say.hfu_as_mfu(run, c, u), **ev)
        said = [say.mfu_apart(c, u)] if mfu_apart and not hfu else []
        said += _rates_apart(c, u, under, foreign)
        if said:
            causes = _causes(run, view, c, u)
            yield self.fail(target, [run], *say.claims_apart(run.id, said, u, causes), **ev, causes=causes)


def _rates_apart(c: Claims, u: Utilisation, under: list[Utilisation], foreign: bool) -> list[str]:
    """The claimed rates further than the tolerance from every recomputed one: TFLOP/s per accelerator (model or
    hardware FLOPs, under each convention the claim may mean), tokens/s in total and per accelerator (a rate
    claimed on its own, no MFU beside it, is checked too)."""
    said = []
    if not foreign and c.tflops_per_accelerator is not None and u.tflops_per_accelerator is not None:
        rates = [t for x in under for t in (x.tflops_per_accelerator, x.hardware_tflops_per_accelerator)]
        if min(o for t in rates if (o := off(c.tflops_per_accelerator, t)) is not None) > TOLERANCE:
            said.append(say.tflops_apart(c, u))
    if _apart(c.tokens_per_s, u.tokens_per_s):
        said.append(say.tokens_apart(c, u))
    # the total given as the per-accelerator rate is its own finding (_audit), not a rate apart
    total_as_per = (u.accelerators or 0) > 1 and _same(c.tokens_per_s_per_accelerator, c.tokens_per_s)
    if _apart(c.tokens_per_s_per_accelerator, u.tokens_per_s_per_accelerator) and not total_as_per:
        said.append(say.tokens_per_accelerator_apart(c, u))
    return said


def _solved(r: Run) -> bool:
    """The run trained to a solution: its target accuracy or its planned epochs, with a time to train."""
    return r.ok and r.stop_criterion in ("target_accuracy", "epochs") and r.time_to_train_s is not None


def _apart(claimed: float | None, recomputed: float | None) -> bool:
    return (o := off(claimed, recomputed)) is not None and o > TOLERANCE


def _near(claimed: float | None, recomputed: float | None) -> bool:
    return (o := off(claimed, recomputed)) is not None and o <= TOLERANCE


def _same(per: float | None, total: float | None) -> bool:
    return (o := off(per, total)) is not None and o <= SAME


def _impossible(finding: Finding) -> Finding:
    """An MFU over 100 % is a number no machine produces: an error, and every output marks it "do not quote"."""
    finding.severity = "error"
    finding.message = f"{DO_NOT_QUOTE}: {finding.message}"
    return finding


def _merged(found: list[Finding]) -> Iterator[Finding]:
    """One finding per problem of a configuration: the repetitions that say the same are named together. A message
    names its run once, as ``<run>: ...`` (after ``do not quote:``); only that name is the run's: a short run id
    (``a``, ``base``) is a part of other words too."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in found:
        run = f.runs[0]
        groups.setdefault((f.outcome, f.message.replace(f"{run}: ", "{run}: ", 1)), []).append(f)
    for (_, message), fs in groups.items():
        first = fs[0]
        runs = sorted({r for f in fs for r in f.runs})
        names = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
        who = runs[0] if len(runs) == 1 else f"{len(runs)} runs ({names})"
        text = message.replace("{run}", who, 1)
        evidence = {**first.evidence, "runs": runs}
        yield Finding(
            first.code, first.severity, first.outcome, first.target, runs, text, evidence, first.fix
        )


def _causes(run: Run, view: View, c: Claims, u: Utilisation) -> list[str]:
    out = []
    if c.peak_tflops is not None:
        kind, what = flops.claimed_peak(run, c.peak_tflops)
        if kind != "dense":
            out.append(say.wrong_peak_cause(c.peak_tflops, what, u))
    if (sp := flops.shape_params(run)) is not None and sp.shard_only:
        out.append(say.shard_cause(sp))
    elif c.params and run.params_total and c.params < (1 - TOLERANCE) * run.params_total:
        out.append(say.claimed_shard_cause(c.params, run.params_total))
    if _apart(c.tokens_per_s, u.tokens_per_s) and u.tokens_per_s:
        ratio = (c.tokens_per_s or 0.0) / u.tokens_per_s
        tp = run.degrees["tp"] * run.degrees["cp"]
        zero = flops.rank_zero_extrapolated(run, view.rank_times.get(run.id))
        if tp > 1 and abs(ratio - tp) <= TOLERANCE * tp:
            out.append(say.per_tp_rank_cause(c, u, tp))
        elif zero is not None and _near(c.tokens_per_s, zero):
            out.append(say.rank_zero_cause(c, u, run.world_size))
        else:
            out.append(say.tokens_cause(c, u))
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
