from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def not_normalised(devices: list[str]) -> Said:
    return (
        f"hardware compared without normalising to peak: {', '.join(devices)}",
        "record peak_tflops of each device in run_start and report fractions of peak beside raw numbers",
    )


class OutdatedOrSpecialPurposeHardware(Rule):
    """Runs compared across hardware must use the same accelerator generation, or be normalised to peak.

    What it checks: a hardware comparison (one model and framework on different accelerator models) either
    records every accelerator's peak (``peak_tflops`` in run_start) so results can be normalised, or it
    fails; so does a pair of ``honestscale compare A B`` whose sides ran on different accelerator models (an
    MLPerf submission on V100s against runs on CPUs, say). Accelerator models are compared by their normalised name (``honestscale.view.accelerator_model``:
    "Nvidia Tesla V100-SXM2-32GB" and "NVIDIA V100" are one chip, a V100). Frameworks are compared only on one
    accelerator model (the view's like-for-like setup); runs on other hardware are left out of a framework
    comparison and named with what differs, never compared.
    Why it misleads: a new accelerator against a two-generations-old one, or a special-purpose chip
    against a general one, shows the hardware's age, not the method's merit (Hoefler 2018, "compare
    against outdated or special-purpose hardware").
    Example: "our framework is 3x faster" measured on A100s against the baseline on K80s.
    Fix: compare on the same hardware; when comparing hardware is the point, record peak_tflops for each
    device and report results as a fraction of peak beside the raw numbers.
    Reference: Hoefler 2018, rule 4; Hoefler & Belli, SC15, rule 8 (normalise to the hardware's peak).
    """

    code = "HS104"
    name = "outdated-or-special-purpose-hardware"
    severity = "warning"
    summary = "compared runs use the same accelerator generation, or results are normalised to peak"

    def targets(self, view: View) -> list[Comparison]:
        pairs = [
            c
            for c in view.of_kind("pair")
            if any(d["field"] == "hardware" for d in c.key.get("differs") or [])
        ]
        return view.of_kind("hardware") + pairs

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        devices = sorted({r.hardware for r in target.runs})
        peaks = {r.id: r.peak_tflops for r in target.runs}
        if all(p is not None and p > 0 for p in peaks.values()):
            return
        yield self.fail(target, target.runs, *not_normalised(devices), devices=devices)
