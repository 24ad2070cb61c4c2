"""A model whose every forward pass first waits 50 ms: a job that runs into Slurm's time limit while its rank
sleeps, so the timeout test (tests/system/test_slurm.py) costs the machine the minute it waits, not a core for that
minute (an MLP on digits at full speed burned one for 60-100 s of every CI run)."""

from __future__ import annotations

import math
import time

import torch
from torch import nn


class Idle(nn.Module):
    """A linear classifier behind a 50 ms wait."""

    def __init__(self, features: int, num_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        out: torch.Tensor = self.linear(x.flatten(1))
        return out


def build(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return Idle(math.prod(input_shape), num_classes)
