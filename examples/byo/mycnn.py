"""A user's single-device PyTorch model, as a researcher would write it: no distributed code at all.

    honestscale run --framework torch --workers 2 --model examples/byo/mycnn.py:build --dataset digits \\
        --epochs 3 --out runs/
    honestscale probe --model examples/byo/mycnn.py:build --workers 1,2
"""

from __future__ import annotations

from torch import nn


def build(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    channels = input_shape[0]
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4, num_classes),
    )
