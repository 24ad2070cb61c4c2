"""The options every runner takes, and its entry point (exit codes).

Standard library only at import time (see :mod:`honestscale.runners.instrument`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from honestscale.events import PURPOSES, SCALING
from honestscale.record import PeerFailed, RunTerminated, TargetNotReached

EXIT_CODES: dict[type[BaseException], int] = {
    RunTerminated: 143,
    PeerFailed: 1,
    TargetNotReached: 3,
    KeyboardInterrupt: 130,
}


def _bounded(
    kind: Callable[[str], Any], low: float, *, low_ok: bool, high: float | None = None
) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, refused (with the bound) outside [low or (low, high]."""
    import argparse

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__} number") from None
        if value < low or (value == low and not low_ok) or (high is not None and value > high):
            bound = f"{'>=' if low_ok else '>'} {low:g}" + (f" and <= {high:g}" if high is not None else "")
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be {bound}")
        return value

    parse.__name__ = kind.__name__
    return parse


POSITIVE_INT = _bounded(int, 1, low_ok=True)
COUNT = _bounded(int, 0, low_ok=True)
POSITIVE = _bounded(float, 0, low_ok=False)
NON_NEGATIVE = _bounded(float, 0, low_ok=True)
FRACTION = _bounded(float, 0, low_ok=False, high=1)


def unknown_names(args: Any, names: Mapping[str, tuple[str, ...]]) -> str | None:
    """A ``--model`` or ``--dataset`` that names nothing the runner offers and no FILE.py:FUNCTION of your own (a
    misspelt ``resnt50``), with the names there are: refused before any rank starts (a campaign spec is checked
    with it before anything launches), not in a traceback in every rank's log."""
    for option, offered in names.items():
        value = getattr(args, option, None)
        if value is None or value in offered or (":" in value and value.split(":", 1)[0].endswith(".py")):
            continue
        return f"--{option} {value!r}: not one this runner offers ({', '.join(offered)}) nor FILE.py:FUNCTION"
    return None


def add_training_args(parser: Any, *, sample_budget: bool = True) -> tuple[Any, Any]:
    """The training options every runner takes with the same name, default and meaning (a cross-framework
    campaign may use only options every runner in it accepts); returns the "how" and "when to stop" groups for
    the runner's own options. ``sample_budget``: the runner can stop after N samples (--max-samples) and
    evaluate every N epochs (--eval-every)."""
    how = parser.add_argument_group("how")
    how.add_argument(
        "--batch-size", type=POSITIVE_INT, default=64, help="GLOBAL batch, split evenly over the workers"
    )
    how.add_argument("--lr", type=POSITIVE, default=0.1)
    how.add_argument("--momentum", type=NON_NEGATIVE, default=0.9)
    how.add_argument("--seed", type=int, default=0)
    how.add_argument(
        "--warmup-steps", type=COUNT, default=3, help="first steps flagged as warm-up (not timed)"
    )
    stop = parser.add_argument_group(
        "when to stop (the first criterion given decides; --epochs is also the cap)"
    )
    stop.add_argument("--epochs", type=POSITIVE_INT, default=10)
    stop.add_argument("--target-accuracy", type=FRACTION, help="stop when validation accuracy reaches this")
    if sample_budget:
        stop.add_argument(
            "--max-samples", type=POSITIVE_INT, help="stop after this many training samples (all workers)"
        )
        stop.add_argument(
            "--eval-every", type=POSITIVE_INT, default=1, help="evaluate train and validation every N epochs"
        )
    return how, stop


def add_recording_args(parser: Any) -> None:
    """The options every runner takes to name and file its run (argparse)."""
    g = parser.add_argument_group("recording")
    g.add_argument("--out", type=Path, required=True, help="folder for <run_id>/events-rank<N>.jsonl")
    g.add_argument("--run-id", help="the same on every rank (honestscale run passes it)")
    g.add_argument("--campaign")
    g.add_argument("--name")
    g.add_argument("--purpose", choices=list(PURPOSES), default="final")
    g.add_argument("--tuning-study")
    g.add_argument("--tuning-trial")
    g.add_argument("--scaling", choices=list(SCALING))
    g.add_argument(
        "--sample-interval", type=NON_NEGATIVE, default=1.0, help="seconds between system samples (0: off)"
    )


RECORDING_KEYS = (
    "out",
    "run_id",
    "campaign",
    "name",
    "purpose",
    "tuning_study",
    "tuning_trial",
    "sample_interval",
)


def run_entry(main: Callable[[], int]) -> None:
    """A runner's entry point: exit 0 on success, 3 target not reached, 143 SIGTERM, 130 Ctrl-C, 1 failure.

    The process ends with ``os._exit`` once every event is written (each was a complete write
    already): tearing down gloo/NCCL/gRPC groups at interpreter exit races with the peers and can
    abort a run that succeeded, so they are left to the operating system.
    """
    import sys
    import traceback

    try:
        code = main()
    except tuple(EXIT_CODES) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        code = EXIT_CODES[type(exc)]
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
