"""What every reader must land of one cell of the conformance matrix (tests/conformance/cells.toml), checked against
the cell's expected values (its generator's own counts): one training is one run, of the world it ran in, with
every optimizer step counted once, its final quality its last evaluation, its status its last launch's, its stop no
earlier than the last thing it logged (where the log records an end; else ``end_unknown`` and no stop). ``check`` returns what is wrong, one sentence each; the integration test and
``scripts/conformance --report`` print them."""

from __future__ import annotations

import json
import struct
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

HERE = Path(__file__).parent
CELLS = HERE / "cells.toml"
FIXTURES = HERE / "fixtures"
CLOCK_S = (
    0.001  # the coarsest clock of a tool's records (MLflow's milliseconds): a stop that close is not early
)


@dataclass(frozen=True)
class Expected:
    """One training as its generator counted it (``expected.json``)."""

    world_size: int
    optimizer_steps: int  # the steps the log holds (read back by the tool's own reader where it holds fewer)
    status: str
    final_metric: str
    final_value: float | None  # None: the log holds no evaluation
    last_logged: float  # the time of the last value any rank logged (the logging process's clock)
    evaluations: int
    end_recorded: bool  # the log says how and when the training ended (else: status end_unknown, no stop)
    spans: list[list[float]]  # per launch, the first and the last time the lowest logging rank logged
    world_known: bool = True  # the log says how many processes trained (else: world size unknown, and said)
    steps_known: bool = True  # the log holds the optimizer steps' count (else: no step event)
    trained_steps: int | None = None  # the steps the training took, where the log holds fewer

    @classmethod
    def read(cls, folder: Path) -> Expected:
        got = json.loads((folder / "expected.json").read_text())
        return cls(**{k: got[k] for k in cls.__dataclass_fields__ if k in got})


def _same(got: float, expected: float) -> bool:
    """Equal to 1e-9, or equal as 32-bit floats (TensorBoard stores a scalar in 32 bits: 0.92 is 0.9200000166893005
    there)."""
    return abs(got - expected) <= 1e-9 or struct.pack("f", got) == struct.pack("f", expected)


def cells() -> dict[str, dict[str, Any]]:
    got: dict[str, dict[str, Any]] = tomllib.loads(CELLS.read_text())["cell"]
    return got


def check(store: Path, expected: Expected) -> list[str]:
    """What the store holds of the cell's one training that differs from what its generator counted."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        runs = con.execute(
            "SELECT run_id, world_size, status, stopped_at, final_metric, final_value, started_at, time_to_train_s, "
            "attrs FROM runs WHERE run_id NOT IN (SELECT run_id FROM superseded_runs) ORDER BY run_id"
        ).fetchall()
        if len(runs) != 1:  # counted: a log that another record of the same training supersedes is in none
            return [f"one training landed as {len(runs)} counted runs ({', '.join(r[0] for r in runs)})"]
        ((run_id, world, status, stopped, metric, value, started, ttt, attrs),) = runs
        (iterations,) = con.execute(
            "SELECT coalesce(sum(iterations), 0) FROM steps WHERE run_id = ? AND rank = "
            "(SELECT min(rank) FROM steps WHERE run_id = ?)",
            [run_id, run_id],
        ).fetchone() or (0,)
        (evals,) = con.execute(
            "SELECT count(DISTINCT (time, coalesce(epoch, -1))) FROM evals WHERE run_id = ? AND rank = "
            "(SELECT min(rank) FROM evals WHERE run_id = ?)",
            [run_id, run_id],
        ).fetchone() or (0,)
    finally:
        con.close()
    wrong = []
    unknown = (json.loads(attrs or "{}").get("imported") or {}).get("unknown") or []
    if not expected.world_known:
        if world is not None or not any(u.startswith("world_size") for u in unknown):
            wrong.append(f"world size {world}, where the log does not say it (unknown, and said so)")
    elif world != expected.world_size:
        wrong.append(f"world size {world}, trained on {expected.world_size}")
    if status != expected.status:
        wrong.append(f"status {status}, the training's {expected.status}")
    if int(iterations) != expected.optimizer_steps:
        held = f" ({expected.trained_steps} taken)" if expected.trained_steps is not None else ""
        wrong.append(
            f"{int(iterations)} steps counted, {expected.optimizer_steps} optimizer steps in the log{held}"
        )
    if not expected.steps_known and not any("optimizer steps" in u for u in unknown):
        wrong.append("the log holds no step count, and the run does not say so")
    if expected.final_value is None:
        if value is not None:
            wrong.append(f"final {metric} {value}, where the log holds no evaluation")
    elif value is None or metric != expected.final_metric or not _same(float(value), expected.final_value):
        wrong.append(
            f"final {metric} {value}, the last evaluation's {expected.final_metric} {expected.final_value}"
        )
    if evals != expected.evaluations:
        wrong.append(f"{evals} evaluations landed, {expected.evaluations} logged")
    if not expected.end_recorded:
        if stopped is not None:
            wrong.append("a stop where the log records none")
    elif stopped is None or float(stopped) < expected.last_logged - CLOCK_S:
        wrong.append(
            f"the run stops {'never' if stopped is None else f'{expected.last_logged - float(stopped):.3f} s'}"
            " before the last value it logged"
        )
    trained = sum(b - a for a, b in expected.spans)
    if ttt is not None and float(ttt) < trained - CLOCK_S:
        wrong.append(
            f"time to train {float(ttt):.2f} s, less than the {trained:.2f} s the launches logged over"
        )
    if (
        expected.end_recorded
        and len(expected.spans) > 1
        and (ttt is None or float(ttt) >= float(stopped) - float(started))
    ):
        wrong.append(f"{len(expected.spans)} launches, but the time between them is counted as training")
    return wrong
