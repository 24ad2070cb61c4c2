from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule
from honestscale.lint._view import Comparison, View


def _device(run: object) -> str | None:
    accel = getattr(run, "accelerator", None)
    return str(accel) if accel else None


class OutdatedOrSpecialPurposeHardware(Rule):
    """Runs compared across hardware must use the same accelerator generation, or be normalised to peak.

    What it checks: a hardware comparison (one model and framework on different accelerators) either
    records every accelerator's peak (``peak_tflops`` in run_start) so results can be normalised, or it
    fails; a framework comparison must run every framework on the same accelerator.
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
        return view.of_kind("hardware", "framework")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        devices = sorted({_device(r) or f"CPU {r.cpu or '?'}" for r in target.runs})
        if target.kind == "framework":
            if len(devices) > 1:
                yield self.fail(target, target.runs, f"frameworks compared on different hardware: {', '.join(devices)}",
                                "run every framework on the same accelerator model", devices=devices)  # fmt: skip
            return
        peaks = {r.id: r.attrs.get("peak_tflops") for r in target.runs}
        if all(isinstance(p, int | float) and p > 0 for p in peaks.values()):
            return
        yield self.fail(
            target,
            target.runs,
            f"hardware compared without normalising to peak: {', '.join(devices)}",
            "record peak_tflops of each device in run_start and report fractions of peak beside raw numbers",
            devices=devices,
        )
