"""Helpers of the tests that write event files with the contract's own writer (``events.EventWriter``): a small
run of every kind (``write_run``), a large campaign (``big_campaign``), and waiting on a condition."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from honestscale import events as ev


def write_run(
    out: Path, run_id: str, world: int = 2, steps: int = 20, stop: str | None = "success"
) -> list[Path]:
    paths = []
    for rank in range(world):
        with ev.EventWriter(out, run_id, rank) as w:
            w.run_start(framework="torch", world_size=world, nodes=1, accelerators_per_node=0, global_batch_size=64,
                        local_batch_size=64 // world, campaign="c1")  # fmt: skip
            for i in range(steps):
                w.step(epoch=i // 10, step=i, samples=64 // world, t_total=0.1, t_data=0.01, t_compute=0.07,
                       t_comm=0.015, t_optimizer=0.005)  # fmt: skip
            if rank == 0:
                w.eval(split="test", metric="accuracy", value=0.91, epoch=1)
            if stop:
                w.run_stop(stop)
            paths.append(w.path)
    return paths


def big_campaign(folder: Path, files: int = 24, steps: int = 6000) -> None:
    for r in range(files):
        with ev.EventWriter(folder, f"run{r // 4}", r % 4) as w:
            w.run_start(framework="torch", world_size=4)
            for i in range(steps):
                w.step(step=i, samples=32, t_total=0.01, t_data=0.001, t_compute=0.008)
            w.run_stop("success")


def wait_for(cond: Any, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")
