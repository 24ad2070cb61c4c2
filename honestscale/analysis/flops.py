"""Model and hardware FLOPs utilisation (MFU, HFU), recomputed from a run's counts under a named convention.

* **FLOPs per token** of a decoder-only transformer, training (forward and backward), from the run's parameter
  counts, ``model_shape`` and ``sequence_length``, never from what a tool printed: with N the non-embedding
  parameters used per token (``params_active`` - ``params_embedding``; ``params_total`` for a dense model without
  ``params_active``), L layers, d = heads x head dim (the hidden size) and T the sequence length,

  - ``palm`` (PaLM appendix B, nanoGPT, torchtitan): 6 N + 12 L d T (attention over the full T x T scores);
  - ``megatron`` (Megatron-LM's causal count): 6 N + 6 L d T (the scores' causal half).

  The forward pass is a third of it (2 N + 4 L d T under palm).
* **Hardware FLOPs** add what activation recomputation runs again: ``full`` one more forward (8 N + 16 L d T
  under palm); ``selective`` (Korthikanti et al. 2022: the attention scores, softmax and their product with the
  values) the forward attention term once more (+ 4 L d T under palm, + 2 L d T under megatron); ``none`` nothing.
* **MFU** = tokens/s per accelerator x model FLOPs per token / the accelerator's dense peak in the run's compute
  data type (``catalogue/peaks.toml``, versioned and cited); **HFU** the same with hardware FLOPs. Tokens/s are
  every rank's counts with each replica's tokens once (``Run.tokens_per_s``), over the accelerators in use. A peak
  a run declares (``declared_peak`` with its source) is used only where the table has none (CPU runs); without
  either, MFU is *cannot verify*, never computed against another card's peak.
* MFU over the repetitions of a configuration: the median with its order-statistic 95 % interval
  (``stats.median_ci``; none below ``stats.MIN_INTERVAL_RUNS`` runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from honestscale.analysis.stats import CI_METHOD, median_ci
from honestscale.catalogue import peaks as table
from honestscale.view import Run

CONVENTIONS = {
    "palm": "6N + 12·L·d·T per token (PaLM, nanoGPT, torchtitan: full attention)",
    "megatron": "6N + 6·L·d·T per token (Megatron-LM: the attention term halved for the causal mask)",
}
DEFAULT_CONVENTION = "palm"
# attention FLOPs of one forward pass per token, in units of L·d·T
_ATTENTION_FORWARD = {"palm": 4, "megatron": 2}
RECOMPUTATION = {
    "none": "nothing recomputed: hardware FLOPs = model FLOPs",
    "selective": "selective recomputation (the attention scores, softmax and their product with the values) runs "
    "the forward attention term once more",
    "full": "full recomputation runs one more forward pass (8N + 16·L·d·T under palm)",
}
MFU_METHOD = (
    "MFU = tokens/s per accelerator (every rank's tokens, each replica's once, over the accelerators in use) x "
    "model FLOPs per token / the dense peak of the accelerator in the run's compute data type"
)
MFU_INTERVAL_METHOD = f"median of runs, {CI_METHOD}"


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def off(claimed: float | None, recomputed: float | None) -> float | None:
    """How far a claimed number is from the recomputed one, relative to the recomputed (None if either is
    missing or the recomputed is 0)."""
    if claimed is None or recomputed is None or recomputed == 0:
        return None
    return abs(claimed - recomputed) / abs(recomputed)


@dataclass(frozen=True)
class Counts:
    """What FLOPs per token are computed from."""

    non_embedding: int  # N
    layers: int  # L
    hidden: int  # d = heads x head dim
    sequence: int  # T


SHAPE_CONVENTION = (
    "per layer, attention 2·d² + 2·d·d_kv (d_kv = kv_heads x d / heads; 4·d² without grouped queries) and MLP "
    "2·d·ffn (ffn = 4·d where not recorded; x the experts used): a lower bound, a gated MLP's third matrix, "
    "biases and norms left out"
)
SHARD = 0.5  # a recorded count below half the shape's lower bound is no whole model's count


@dataclass(frozen=True)
class ShapeParams:
    """The non-embedding parameters ``model_shape`` implies (a lower bound, ``SHAPE_CONVENTION``) beside the count
    the run recorded (its ``params_active`` or ``params_total`` less ``params_embedding``)."""

    from_shape: int
    recorded: int
    field: str  # params_active | params_total

    @property
    def shard_only(self) -> bool:
        """The recorded count is too small for the shape: one shard's (an FSDP model's numel()), not the model's."""
        return self.recorded < SHARD * self.from_shape

    def describe(self) -> str:
        return (
            f"{self.field} less params_embedding is {self.recorded:,} non-embedding parameters, "
            f"1/{self.from_shape / self.recorded:.1f} of the {self.from_shape:,} at least that model_shape "
            f"gives ({SHAPE_CONVENTION})"
        )


def shape_params(run: Run) -> ShapeParams | None:
    """The parameters ``model_shape`` implies beside the recorded count; None without both."""
    shape = run.model_shape
    layers, d = _int(shape.get("layers")), _int(shape.get("hidden"))
    field, used = (
        ("params_active", run.params_active) if run.params_active else ("params_total", run.params_total)
    )
    if (
        layers is None
        or d is None
        or not used
        or (recorded := int(used) - int(run.params_embedding or 0)) <= 0
    ):
        return None
    heads, kv_heads = _int(shape.get("heads")), _int(shape.get("kv_heads"))
    d_kv = kv_heads * d // heads if heads and kv_heads else d
    ffn = _int(shape.get("ffn_hidden")) or 4 * d
    experts = _int(shape.get("experts_per_token" if field == "params_active" else "experts")) or 1
    return ShapeParams(layers * (2 * d * d + 2 * d * d_kv + 2 * d * ffn * experts), recorded, field)


def counts(run: Run, trust_shape: bool = False) -> tuple[Counts | None, tuple[str, ...]]:
    """The run's counts, or None and the run_start fields that are missing; ``trust_shape``: N from
    ``model_shape`` (its lower bound) where the recorded count is a shard's (``ShapeParams.shard_only``)."""
    shape = run.model_shape
    used = run.params_active or run.params_total
    if trust_shape and (sp := shape_params(run)) is not None and sp.shard_only:
        used = sp.from_shape + int(run.params_embedding or 0)
    got = {
        "params_total": used,
        "params_embedding": run.params_embedding if run.params_embedding is not None else None,
        "model_shape.layers": _int(shape.get("layers")),
        "model_shape.hidden": _int(shape.get("hidden")),
        "sequence_length": run.sequence_length,
    }
    missing = tuple(k for k, v in got.items() if v is None)
    if missing or used is None:
        return None, missing
    n = int(used) - int(run.params_embedding or 0)
    if n <= 0:
        return None, ("params_embedding (not below params_total)",)
    return Counts(
        n,
        int(got["model_shape.layers"] or 0),
        int(got["model_shape.hidden"] or 0),
        int(run.sequence_length or 0),
    ), ()


def model_flops(c: Counts, convention: str = DEFAULT_CONVENTION) -> float:
    """Training FLOPs per token under ``convention``: 6N + 3 x the forward attention term."""
    return 6.0 * c.non_embedding + 3.0 * _ATTENTION_FORWARD[convention] * c.layers * c.hidden * c.sequence


def hardware_flops(
    c: Counts, convention: str = DEFAULT_CONVENTION, checkpointing: str | None = None
) -> float:
    """Model FLOPs plus what activation recomputation runs again (``RECOMPUTATION``)."""
    attention = _ATTENTION_FORWARD[convention] * c.layers * c.hidden * c.sequence
    extra = {"full": 2.0 * c.non_embedding + attention, "selective": float(attention)}.get(
        checkpointing or "", 0.0
    )
    return model_flops(c, convention) + extra


@dataclass(frozen=True)
class Claims:
    """What a tool printed about itself (run_start ``claims``): numbers to check, never facts."""

    mfu: float | None = None
    hfu: float | None = None
    tflops_per_accelerator: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_accelerator: float | None = None
    peak_tflops: float | None = None
    peak_dtype: str | None = None
    flops_convention: str | None = None
    params: int | None = None

    @property
    def any(self) -> bool:
        return any(
            v is not None
            for v in (
                self.mfu,
                self.hfu,
                self.tflops_per_accelerator,
                self.tokens_per_s,
                self.tokens_per_s_per_accelerator,
                self.peak_tflops,
            )
        )

    @property
    def convention(self) -> str | None:
        """The named convention the claim used, as the table names it (None: not said, or not one it knows)."""
        c = (self.flops_convention or "").lower()
        return next((k for k in CONVENTIONS if k in c), None)


def claims_of(run: Run) -> Claims:
    c = run.tool_claims
    if c is None:
        return Claims()
    return Claims(
        _num(c.get("mfu")),
        _num(c.get("hfu")),
        _num(c.get("tflops_per_accelerator")),
        _num(c.get("tokens_per_s")),
        _num(c.get("tokens_per_s_per_accelerator")),
        _num(c.get("peak_tflops")),
        str(c["peak_dtype"]) if c.get("peak_dtype") else None,
        str(c["flops_convention"]) if c.get("flops_convention") else None,
        _int(c.get("params")),
    )


@dataclass(frozen=True)
class PeakChoice:
    """The peak a run's MFU is measured against, or why there is none and what to record."""

    tflops: float | None
    dtype: str | None
    source: str = ""  # the datasheet (table) or the run's declaration
    declared: bool = False
    catalogued: table.Peak | None = None
    key: str | None = None  # the table's accelerator key (None: not in the table)
    missing: str = ""  # why no peak
    record: str = ""  # what to record for one


def dtype_of(run: Run) -> str | None:
    """The data type of the run's matrix multiplies: ``compute_dtype``, else the claim's ``peak_dtype``, else
    the one its ``precision`` names (``amp-bf16``)."""
    return (
        table.dtype_of(run.compute_dtype)
        or table.dtype_of(claims_of(run).peak_dtype)
        or table.dtype_in(run.precision)
    )


def peak_for(run: Run) -> PeakChoice:
    """The table's dense peak of the run's accelerator in its compute data type; a declared peak (with its
    source) only where the table has none; else none, with why and what to record."""
    dtype = dtype_of(run)
    key = None if run.cpu_only else table.accelerator_key(run.accelerator)
    found = table.peak(key, dtype)
    if found is not None:
        return PeakChoice(found.tflops, found.dtype, found.describe(), catalogued=found, key=key)
    dp = run.declared_peak
    tflops, source = _num(dp.get("tflops")), dp.get("source")
    if tflops and tflops > 0 and isinstance(source, str) and source.strip():
        named = dp.get("dtype")
        d = table.dtype_of(named if isinstance(named, str) else None) or dtype
        return PeakChoice(tflops, d, f"declared by the run: {source}", declared=True, key=key)
    record = (
        "`declared_peak` in run_start: tflops (dense, per accelerator), dtype and source (a datasheet or a "
        "measured peak); honestscale's torch runner: --declared-peak-tflops and --declared-peak-source"
    )
    if run.cpu_only:
        missing = f"a CPU run ({run.cpu or 'CPU not recorded'}): the peak table has no CPU peaks"
    elif not run.accelerator:
        missing, record = (
            "the accelerator is not recorded",
            "the accelerator's name in run_start, or " + record,
        )
    elif key is None:
        missing = f"{run.accelerator!r} is not in the peak table (version {table.version()})"
        record = (
            "the accelerator's full name as torch.cuda.get_device_name() prints it (form factor included: "
            "SXM, PCIe, NVL), or " + record
        )
    elif dtype is None:
        missing, record = (
            "the compute data type is not recorded",
            "`compute_dtype` in run_start, or " + record,
        )
    else:
        missing = f"the peak table (version {table.version()}) has no dense {dtype} peak for {key}"
    if dp and not (isinstance(source, str) and source.strip()):
        missing += "; its declared_peak names no source"
    return PeakChoice(None, dtype, key=key, missing=missing, record=record)


@dataclass(frozen=True)
class Utilisation:
    """One run's MFU and HFU, recomputed under one convention, with every number they are made of."""

    run_id: str
    convention: str
    flops_per_token: float | None  # model FLOPs per token
    hardware_flops_per_token: float | None
    flops_source: str  # recomputed | recorded (the run's own flops_per_token: no shape to recompute from)
    tokens_per_s: float | None
    tokens_per_s_per_accelerator: float | None
    accelerators: int | None
    tflops_per_accelerator: float | None  # model FLOPs achieved
    hardware_tflops_per_accelerator: float | None
    peak: PeakChoice
    mfu: float | None
    hfu: float | None
    missing: tuple[str, ...] = field(default_factory=tuple)  # what to record for the FLOPs or the rate

    def as_json(self) -> dict[str, Any]:
        return {
            "convention": self.convention,
            "flops_per_token": self.flops_per_token,
            "hardware_flops_per_token": self.hardware_flops_per_token,
            "flops_source": self.flops_source,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_accelerator": self.tokens_per_s_per_accelerator,
            "accelerators": self.accelerators,
            "tflops_per_accelerator": self.tflops_per_accelerator,
            "peak_tflops": self.peak.tflops,
            "peak_dtype": self.peak.dtype,
            "peak_source": self.peak.source,
            "peak_table_version": table.version(),
            "mfu": self.mfu,
            "hfu": self.hfu,
        }


def utilisation(run: Run, convention: str | None = None, trust_shape: bool = True) -> Utilisation:
    """The run's MFU and HFU under ``convention`` (the claim's, else ``DEFAULT_CONVENTION``); a recorded parameter
    count too small for the run's ``model_shape`` (a shard's) is replaced by the shape's unless ``trust_shape`` is
    false (``counts``)."""
    conv = convention or claims_of(run).convention or DEFAULT_CONVENTION
    c, missing = counts(run, trust_shape)
    model = hw = None
    source = "recomputed"
    if c is not None:
        model, hw = model_flops(c, conv), hardware_flops(c, conv, run.activation_checkpointing)
    else:
        recorded = run.flops_per_token
        got = _num(recorded.get(conv)) if recorded is not None else None
        if got and run.activation_checkpointing in (None, "none"):
            model = hw = got
            source = "recorded"
    rate = run.tokens_per_s_per_accelerator
    if rate is None:
        missing += ("tokens per step (step events' `tokens`)",)
    peak = peak_for(run)
    tf = None if rate is None or model is None else rate * model / 1e12
    htf = None if rate is None or hw is None else rate * hw / 1e12
    return Utilisation(
        run.id,
        conv,
        model,
        hw,
        source,
        run.tokens_per_s,
        rate,
        run.workers,
        tf,
        htf,
        peak,
        None if tf is None or not peak.tflops else tf / peak.tflops,
        None if htf is None or not peak.tflops else htf / peak.tflops,
        missing,
    )


@dataclass(frozen=True)
class MfuSummary:
    """MFU over the repetitions of one configuration: the median with its 95 % interval (None below
    ``MIN_INTERVAL_RUNS`` runs)."""

    convention: str
    median: float
    low: float | None
    high: float | None
    runs: int
    method: str = MFU_INTERVAL_METHOD

    def describe(self) -> str:
        ci = (
            f" [{100 * self.low:.1f}, {100 * self.high:.1f}]"
            if self.low is not None and self.high is not None
            else " (too few runs for an interval)"
        )
        return f"MFU {100 * self.median:.1f} %{ci} ({self.convention}), median of {self.runs} runs"


def mfu_over(runs: Iterable[Run], convention: str = DEFAULT_CONVENTION) -> MfuSummary | None:
    """MFU of the runs of one configuration under ``convention``: median and order-statistic interval."""
    vals = [u.mfu for r in runs if (u := utilisation(r, convention)).mfu is not None]
    if not vals:
        return None
    lo, hi = median_ci(vals)
    return MfuSummary(convention, median(vals), lo, hi, len(vals))


def rank_zero_extrapolated(run: Run, rank_times: Mapping[int, Sequence[float]] | None) -> float | None:
    """The tokens/s a tool reports when it multiplies rank 0's rate by the world size (Lightning's ``Throughput``):
    the run's tokens/s x the slowest rank's step time over rank 0's, ranks counting equal tokens. None without
    step times of rank 0 and of another rank."""
    total = run.tokens_per_s
    if not rank_times or 0 not in rank_times or len(rank_times) < 2 or total is None:
        return None
    t0 = sum(rank_times[0])
    slowest = max(sum(v) for v in rank_times.values())
    return None if t0 <= 0 else total * slowest / t0


def conventions_claimed(runs: Iterable[Run]) -> dict[str, list[str]]:
    """Convention -> runs whose claimed MFU or TFLOP/s names it (as recorded: an unknown name stays itself)."""
    out: dict[str, list[str]] = {}
    for r in runs:
        c = claims_of(r)
        if c.flops_convention and (c.mfu is not None or c.tflops_per_accelerator is not None):
            out.setdefault(c.convention or c.flops_convention, []).append(r.id)
    return out


def audited(run: Run) -> bool:
    """Whether the run has an MFU to check: a claim, or the counts (FLOPs per token and tokens) to compute one."""
    if claims_of(run).any:
        return True
    return run.tokens_per_s is not None and (counts(run)[0] is not None or run.flops_per_token is not None)


PEAK_TOLERANCE = (
    0.02  # a claimed peak within 2 % of a table value is that value (989 vs 989.5, 2500 vs 2516.6)
)


def _near(a: float, b: float | None) -> bool:
    return b is not None and b > 0 and abs(a - b) <= PEAK_TOLERANCE * b


def claimed_peak(run: Run, tflops: float) -> tuple[str, str]:
    """What a claimed peak is, against the table: (kind, sentence). Kinds: ``dense`` (the run's own dense peak:
    right), ``sparse`` (its "with sparsity" figure), ``vector`` (its non-tensor-core peak), ``halved`` (half its
    dense peak: a dense value halved again), ``doubled``, ``other-dtype`` (the dense peak of another data type),
    ``other-card`` (another accelerator's peak), ``unknown``."""
    choice = peak_for(run)
    own = table.peak(choice.key, choice.dtype)
    if _near(tflops, choice.tflops):
        return "dense", ""
    mine = table.matches(tflops, choice.key, PEAK_TOLERANCE) if choice.key else []
    for want in ("sparse", "vector"):
        for p, kind in mine:
            if kind == want and (own is None or p.dtype == own.dtype or want == "vector"):
                what = "'with sparsity'" if kind == "sparse" else "non-tensor-core"
                return kind, f"the {what} {p.dtype} peak of the {p.label}"
    if own is not None and _near(tflops, own.tflops / 2):
        return "halved", (
            f"half the {own.label}'s dense {own.dtype} peak ({own.tflops:g} TFLOP/s): a dense value "
            "halved again as if it were a sparse one"
        )
    if own is not None and _near(tflops, own.tflops * 2) and own.sparse is None:
        return "doubled", f"twice the {own.label}'s dense {own.dtype} peak ({own.tflops:g} TFLOP/s)"
    for p, kind in mine:
        if kind == "dense":
            return "other-dtype", f"the dense {p.dtype} peak of the {p.label}, not its {choice.dtype} one"
    # another card's peak in the same data type (a fallback table entry: the A100's 312 on an MI355X)
    others = [
        (p, k)
        for p, k in table.matches(tflops, None, PEAK_TOLERANCE)
        if p.key != choice.key and p.dtype == choice.dtype
    ]
    if others:
        others.sort(key=lambda pk: (pk[1] != "dense", pk[0].key))
        p, kind = others[0]
        return (
            "other-card",
            f"the {'dense' if kind == 'dense' else kind} {p.dtype} peak of another card, the {p.label}",
        )
    return "unknown", ""
