"""Peak throughput per accelerator and data type: the versioned, cited table MFU is measured against.

Data, not code: ``peaks.toml`` beside this module holds per accelerator (one GPU, one GCD of an MI250X, one TPU
chip) and data type the **dense** matrix peak in TFLOP/s with its source, and where the vendor headlines them the
sparse ("with sparsity") and non-tensor peaks, marked as such: never denominators, kept so that a claim that
divided by one is recognised (HS107). :func:`accelerator_key` maps the names runs record
(``torch.cuda.get_device_name()``, jax's ``device_kind``) to the table's keys, keeping form factors apart (an
H100 PCIe is not an H100 SXM); a name it cannot place gives None, never another card's peak.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Kind = Literal["dense", "sparse", "vector"]
KINDS: tuple[Kind, ...] = ("dense", "sparse", "vector")
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")

# how frameworks and tools spell a data type -> the table's name
_DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32", "tfloat32": "tf32",
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "mxfp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4", "float4": "fp4", "i8": "int8",
}  # fmt: skip


@dataclass(frozen=True)
class Peak:
    """One accelerator's peak in one data type."""

    key: str  # the table's accelerator key (h100-sxm)
    label: str  # as a reader names it
    dtype: str
    tflops: float  # the dense peak (TFLOP/s; TOPS for int8)
    per: str  # GPU | GCD | chip
    source: str
    sparse: float | None = None  # the vendor's "with sparsity" figure, never a denominator
    vector: float | None = None  # the non-tensor (CUDA core / vector) peak, never a denominator
    halved: bool = False  # the datasheet printed only the sparse figure: dense = half of it
    note: str = ""
    uncertain: str = ""

    def describe(self) -> str:
        how = " (the datasheet's sparse figure halved)" if self.halved else ""
        return f"{self.label}: {self.tflops:g} TFLOP/s dense {self.dtype} per {self.per}{how}; {self.source}"


@cache
def _data() -> dict[str, Any]:
    raw = resources.files("honestscale.catalogue").joinpath("peaks.toml").read_text(encoding="utf-8")
    return tomllib.loads(raw)


def version() -> str:
    """The table's version (the date its values were last checked)."""
    return str(_data()["version"])


def accelerators() -> list[str]:
    """The table's accelerator keys."""
    return sorted(k for k, v in _data().items() if isinstance(v, dict))


def dtype_of(text: str | None) -> str | None:
    """The table's name for a data type (``bfloat16`` -> ``bf16``; ``torch.float16`` -> ``fp16``), or None."""
    if not text:
        return None
    t = str(text).lower().strip().removeprefix("torch.")
    if t in DTYPES:
        return t
    return _DTYPE_ALIASES.get(t)


def dtype_in(precision: str | None) -> str | None:
    """The data type a free-text precision names (``amp-bf16``, ``mixed_float16``, ``fp32``), or None."""
    if not precision:
        return None
    for word in re.split(r"[^a-z0-9]+", precision.lower()):
        got = dtype_of(word)
        if got:
            return got
    return None


# (pattern over the lower-cased name, key): the first match wins; Grace Blackwell before Blackwell (``gb200``
# holds ``b200``), NVL and PCIe before the SXM default of a chip, and a name that does not say its form factor
# where the form factors differ gives None.
_NAMES: tuple[tuple[str, str | None], ...] = (
    (r"\bgb300\b", "gb300"),
    (r"\bgb200\b", "gb200"),
    (r"\bb300\b", "b300"),
    (r"\bb200\b", "b200"),
    (r"\bh200\b.*\b(nvl|pcie)\b", "h200-nvl"),
    (r"\bh200\b", "h200"),
    (r"\bh100\b.*\bnvl\b", "h100-nvl"),
    (r"\bh100\b.*\bpcie\b", "h100-pcie"),
    (r"\bh100\b.*\b(sxm\d?|hbm3)\b", "h100-sxm"),
    (r"\bh100\b", None),  # "NVIDIA H100": SXM, PCIe or NVL? (their peaks differ by 30 %)
    (r"\ba100\b.*\bpcie\b", "a100-pcie"),
    (r"\ba100\b.*\bsxm\d?\b", "a100-sxm"),
    (r"\bv100s\b.*\bpcie\b", "v100s-pcie"),
    (r"\bv100\b.*\bpcie\b", "v100-pcie"),
    (r"\bv100\b.*\bsxm2\b", "v100-sxm2"),
    (r"\bmi250x\s*/\s*mi250\b", None),  # ROCm's name for either part: MI250 and MI250X peaks differ
    (r"\bmi250x\b", "mi250x"),
    (r"\bmi300x\b", "mi300x"),
    (r"\bmi325x\b", "mi325x"),
    (r"\bmi350x\b", "mi350x"),
    (r"\bmi355x\b", "mi355x"),
    (r"\btpu\s*v4\b", "tpu-v4"),
    (r"\btpu\s*v5\s*(lite|e)\b|\btpu\s*v5e\b", "tpu-v5e"),
    (r"\btpu\s*v5p?\b", "tpu-v5p"),  # jax names a v5p chip "TPU v5"
    (r"\btpu\s*v6\s*(lite|e)\b|\btpu\s*v6e\b|\btrillium\b", "tpu-v6e"),
)


def accelerator_key(name: str | None) -> str | None:
    """The table's key for an accelerator name as runs record it (``NVIDIA H100 80GB HBM3`` -> ``h100-sxm``,
    ``NVIDIA H100 PCIe`` -> ``h100-pcie``, ``AMD Instinct MI300X`` -> ``mi300x``, ``TPU v5p`` -> ``tpu-v5p``), or
    None: unknown, or a name that does not say which form factor of a chip whose form factors differ."""
    if not name:
        return None
    text = re.sub(r"[-_]", " ", name.lower())
    for pattern, key in _NAMES:
        if re.search(pattern, text):
            return key
    return None


def peak(key: str | None, dtype: str | None) -> Peak | None:
    """The dense peak of accelerator ``key`` in ``dtype``, or None where the table has none."""
    entry = _data().get(key or "")
    d = dtype_of(dtype)
    if not isinstance(entry, dict) or d is None or not isinstance(entry.get(d), dict):
        return None
    v = entry[d]
    return Peak(
        key=str(key),
        label=str(entry.get("label", key)),
        dtype=d,
        tflops=float(v["dense"]),
        per=str(entry.get("per", "GPU")),
        source=str(entry.get("source", "")),
        sparse=float(v["sparse"]) if "sparse" in v else None,
        vector=float(v["vector"]) if "vector" in v else None,
        halved=bool(v.get("halved", False)),
        note=str(entry.get("note", "")),
        uncertain=str(entry.get("uncertain", "")),
    )


def peaks_of(key: str | None) -> list[Peak]:
    """Every data type's peak of accelerator ``key`` (empty for a key the table does not have)."""
    return [p for d in DTYPES if (p := peak(key, d)) is not None]


def matches(tflops: float, key: str | None = None, tolerance: float = 0.02) -> list[tuple[Peak, Kind]]:
    """The table's values within ``tolerance`` (relative) of ``tflops``: (peak, dense | sparse | vector), of
    accelerator ``key`` or, without one, of every accelerator. What a claimed peak is (its own dense peak, a
    sparse one, another data type's, another card's)."""
    out: list[tuple[Peak, Kind]] = []
    for k in [key] if key else accelerators():
        for p in peaks_of(k):
            for kind in KINDS:
                v = p.tflops if kind == "dense" else p.sparse if kind == "sparse" else p.vector
                if v and abs(tflops - v) <= tolerance * v:
                    out.append((p, kind))
    return out
