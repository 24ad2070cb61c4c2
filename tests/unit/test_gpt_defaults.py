"""`--model gpt`'s own defaults and what it says a run will cost before training (issue 55 item 7): a first
transformer run is sized for a 2-core machine, and a run that would not be is told so before it starts."""

from __future__ import annotations

import argparse

import pytest

from honestscale.record.world import World
from honestscale.runners import _transformer
from honestscale.runners.torch_ddp import build_parser, settle_args


def _settled(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    line = ["--model", "gpt", "--out", "runs", *argv]
    args = parser.parse_args(line)
    assert settle_args(args, parser, line) is None
    return args


@pytest.mark.parametrize(
    ("argv", "lr", "epochs", "target"),
    [
        ((), 0.003, 3, 2.0),  # nothing given: gpt-tiny's sizing, trained to its target
        (("--lr", "0.1"), 0.1, 3, 2.0),  # what is given is kept
        (("--epochs", "1"), 0.003, 1, None),  # an epoch budget: no target added to it
        (("--max-samples", "320"), 0.003, 3, None),  # a sample budget: judged by it, not by a target
        (("--target-loss=2.5",), 0.003, 3, 2.5),
    ],
)
def test_gpt_takes_its_own_defaults_where_the_command_line_gives_none(
    argv: tuple[str, ...], lr: float, epochs: int, target: float | None
) -> None:
    args = _settled(*argv)
    assert (args.lr, args.epochs, args.target_loss) == (lr, epochs, target)


def test_the_other_models_keep_the_shared_defaults() -> None:
    parser = build_parser()
    line = ["--model", "mlp", "--out", "runs"]
    args = parser.parse_args(line)
    assert settle_args(args, parser, line) is None
    assert (args.lr, args.epochs) == (0.1, 10)


def test_a_run_too_large_for_the_machine_is_told_so_before_it_starts() -> None:
    """gpt2-small's FLOPs for an epoch of the default corpus on one CPU rank take far over 10 minutes at any CPU's
    matrix rate: the message before training says so and what trains in minutes; gpt-tiny's does not warn."""
    import torch

    world = World(0, 0, 1, 1, "127.0.0.1", 0, "local", 1)
    small = _settled("--model-size", "gpt2-small")
    said = _transformer._expected_cost(small, world, 488, torch.device("cpu"))
    assert "gpt2-small" in said and "over 10 min" in said and "--model-size" in said, said
    tiny = _settled()
    said = _transformer._expected_cost(tiny, world, 488, torch.device("cpu"))
    assert "gpt-tiny" in said and "3-epoch cap" in said and "over 10 min" not in said, said
