from __future__ import annotations

import json
import math
from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View

# Standard input sizes (channels, height, width) of common datasets; a flat vector for tabular ones.
STANDARD: dict[str, tuple[int, ...]] = {
    "imagenet": (3, 224, 224),
    "cifar10": (3, 32, 32),
    "cifar100": (3, 32, 32),
    "mnist": (1, 28, 28),
    "fashion-mnist": (1, 28, 28),
    "digits": (1, 8, 8),
}

NO_INPUT_SHAPE: Said = ("no recorded input shape", "record input_shape in run_start")


def no_standard_size(dataset: str) -> Said:
    return (
        f"no standard input size is known for dataset {dataset!r}",
        "state the dataset's usual input size beside the results",
    )


def nonstandard_inputs(seen: list[str], dataset: str, standard: tuple[int, ...]) -> Said:
    return (
        f"inputs {', '.join(seen)} differ from {dataset}'s standard {list(standard)}",
        "train at the standard input size, or label the run as a separate experiment",
    )


class UnreasonablyLargeInputs(Rule):
    """Inputs must have the dataset's standard size, or the deviation must be the declared point.

    What it checks: the recorded input shape of each run equals the standard shape of its dataset
    (ImageNet 3x224x224, CIFAR 3x32x32, MNIST 1x28x28, digits 1x8x8), or that shape flattened to one
    vector of the same size (150528 for ImageNet, as an MLP reads it); a run with no recorded shape (or an
    empty one) cannot be verified.
    Why it misleads: inflating inputs (or the batch) raises arithmetic intensity and GPU utilisation,
    making scaling and throughput look better than for the task anyone trains (Hoefler 2018, "use
    unreasonably large inputs").
    Example: ImageNet models benchmarked at 512x512 to fill the GPU, compared with others at 224.
    Fix: train at the standard size; report other sizes only as a separate, labelled experiment.
    Reference: Hoefler 2018, rule 9.
    """

    code = "HS109"
    name = "unreasonably-large-inputs"
    severity = "warning"
    summary = "inputs have the dataset's standard size"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        dataset = str(target.key.get("dataset") or "").lower()
        standard = STANDARD.get(dataset)
        shapes = {
            r.id: tuple(json.loads(r.input_shape or "[]")) or None for r in target.runs
        }  # [] is no size
        if any(s is None for s in shapes.values()):
            yield self.cannot_verify(
                target,
                target.runs,
                *NO_INPUT_SHAPE,
                dataset=dataset or None,
            )
            return
        if standard is None:
            yield self.cannot_verify(
                target,
                target.runs,
                *no_standard_size(dataset),
                dataset=dataset or None,
            )
            return
        allowed = (standard, (math.prod(standard),))  # flattened for an MLP
        odd = [r for r in target.runs if shapes[r.id] not in allowed]
        if odd:
            seen = sorted({str(list(shapes[r.id] or ())) for r in odd})
            yield self.fail(
                target,
                odd,
                *nonstandard_inputs(seen, dataset, standard),
                input_shapes=seen,
                standard=list(standard),
            )
