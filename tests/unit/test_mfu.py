"""MFU recomputed from a run's counts (analysis/flops.py) against a hand calculation, and HS107's message.

The run: a decoder with N = 1.0e9 non-embedding parameters (1.1e9 in all, 1.0e8 of them embeddings), L = 16
layers, d = 2,048, T = 1,024 tokens of context, a global batch of 64 sequences (65,536 tokens per step) on one
H100 SXM (dense bf16 peak: the datasheet's 1,979 "with sparsity", halved: 989.5 TFLOP/s), steps of 2.0 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from honestscale.analysis import flops
from honestscale.catalogue import peaks
from honestscale.lint import lint
from tests.lint_campaigns import view_of

RUN: dict[str, Any] = {
    "id": "gpt",
    "workers": 1,
    "reps": 6,
    "step_s": 2.0,
    "model": "gpt-1.1b",
    "dataset": "openwebtext",
    "accelerator": "NVIDIA H100 80GB HBM3",
    "global_batch_size": 64,
    "sequence_length": 1024,
    "compute_dtype": "bf16",
    "activation_checkpointing": "none",
    "params_total": 1_100_000_000,
    "params_embedding": 100_000_000,
    "params_active": 1_100_000_000,
    "model_shape": {"layers": 16, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 50304},
}

# by hand, from the formulas (PaLM appendix B; Megatron's causal count; one more forward for full recomputation)
N, L, D, T = 1.0e9, 16, 2048, 1024
PALM = 6 * N + 12 * L * D * T  # 6,402,653,184 FLOPs per token
MEGATRON = 6 * N + 6 * L * D * T  # 6,201,326,592
FULL = 8 * N + 16 * L * D * T  # 8,536,870,912: 6N + 2N and 12 + 4 attention units
SELECTIVE = PALM + 4 * L * D * T  # the forward attention term once more
TOKENS_PER_S = 64 * 1024 / 2.0  # 32,768
PEAK = 1979.0 / 2  # TFLOP/s
MFU = TOKENS_PER_S * PALM / (PEAK * 1e12)  # 0.21203...


def test_flops_per_token_by_hand() -> None:
    c = flops.Counts(int(N), L, D, T)
    assert flops.model_flops(c, "palm") == PALM == 6_402_653_184
    assert flops.model_flops(c, "megatron") == MEGATRON
    assert flops.hardware_flops(c, "palm", "full") == FULL
    assert flops.hardware_flops(c, "palm", "selective") == SELECTIVE
    assert flops.hardware_flops(c, "palm", "none") == PALM


def test_peaks_never_merge_form_factors_or_fall_back() -> None:
    key = peaks.accelerator_key
    assert [key("NVIDIA H100 80GB HBM3"), key("NVIDIA H100 PCIe"), key("NVIDIA H100 NVL")] == [
        "h100-sxm", "h100-pcie", "h100-nvl",
    ]  # fmt: skip
    assert key("NVIDIA H200") == "h200" and key("NVIDIA GH200 480GB") is None
    assert key("Tesla V100-SXM2-32GB") == "v100-sxm2" and key("NVIDIA A100-SXM4-80GB") == "a100-sxm"
    assert key("AMD Instinct MI300X") == "mi300x" and key("AMD Instinct MI355X") == "mi355x"
    assert key("TPU v5p") == "tpu-v5p" and key("NVIDIA GB200") == "gb200" and key("NVIDIA B200") == "b200"
    assert key("NVIDIA H100") is None and key("Intel(R) Data Center GPU Max 1550") is None
    h100 = peaks.peak("h100-sxm", "bf16")
    assert h100 is not None and h100.tflops == PEAK and h100.sparse == 1979.0 and h100.halved
    assert peaks.peak("v100-sxm2", "bf16") is None  # no bf16 path: no peak, never another type's
    assert peaks.version()


def test_recomputed_mfu_matches_the_hand_calculation(tmp_path: Path) -> None:
    view = view_of(tmp_path, {"runs": [RUN]})
    run = view.runs[0]
    u = flops.utilisation(run)
    assert u.tokens_per_s == pytest.approx(TOKENS_PER_S)
    assert u.flops_per_token == pytest.approx(PALM)
    assert u.tflops_per_accelerator == pytest.approx(TOKENS_PER_S * PALM / 1e12)
    assert u.peak.tflops == PEAK
    assert u.mfu == pytest.approx(MFU) and u.mfu == pytest.approx(0.21203, abs=1e-5)
    assert flops.utilisation(run, "megatron").mfu == pytest.approx(TOKENS_PER_S * MEGATRON / (PEAK * 1e12))
    assert u.hfu == pytest.approx(MFU)  # no recomputation: HFU = MFU


def test_mfu_over_repetitions_is_a_median_with_order_statistic_interval(tmp_path: Path) -> None:
    steps = [1.6, 2.0, 2.0, 2.5, 2.0, 2.0]
    view = view_of(tmp_path, {"runs": [RUN | {"step_s_by_rep": steps}]})
    s = flops.mfu_over(view.runs)
    assert s is not None and s.runs == 6
    assert s.median == pytest.approx(MFU)
    # six runs: the 95 % interval of the median is the 1st and 6th of them (96.9 % coverage)
    assert s.low == pytest.approx(MFU * 2.0 / 2.5) and s.high == pytest.approx(MFU * 2.0 / 1.6)


def test_hs107_names_the_recomputed_value_beside_the_claimed_one(tmp_path: Path) -> None:
    claim = {"mfu": MFU / 2, "peak_tflops": 1979.0, "peak_dtype": "bf16", "flops_convention": "palm"}
    view = view_of(tmp_path, {"runs": [RUN | {"claims": claim}]})
    found = [f for f in lint(view, select=["HS107"]).findings if f.outcome == "fail"]
    text = " | ".join(f.message for f in found)
    assert f"claimed MFU {100 * MFU / 2:.1f} % vs recomputed {100 * MFU:.1f} %" in text  # 10.6 % vs 21.2 %
    assert "'with sparsity' bf16 peak" in text
    assert all(f.runs and f.fix for f in found)


def test_cpu_without_a_declared_peak_cannot_be_verified(tmp_path: Path) -> None:
    cpu = RUN | {"accelerator": None, "backend": "gloo", "compute_dtype": "fp32"}
    view = view_of(tmp_path, {"runs": [cpu]})
    found = lint(view, select=["HS107"]).findings
    assert found and {f.outcome for f in found} == {"cannot_verify"}
    assert all("declared_peak" in f.fix for f in found)
    declared = cpu | {
        "declared_peak": {"tflops": 4.6, "dtype": "fp32", "source": "EPYC 7742 datasheet x cores"}
    }
    u = flops.utilisation(view_of(tmp_path / "b", {"runs": [declared]}).runs[0])
    assert u.peak.declared and u.mfu == pytest.approx(TOKENS_PER_S * PALM / 4.6e12)
