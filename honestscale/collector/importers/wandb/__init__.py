"""Weights & Biases offline runs (``wandb/offline-run-<time>-<id>/run-<id>.wandb``), read record by record with
wandb's own protobuf classes (the file's framing: ``_records.py``).

wandb 0.31 writes no ``files/*.json`` offline: the run's config, history, system statistics and exit live only in
the records. What a run tells:

* the run record: W&B's run id, project, ``group`` and ``job_type``, its name, host and start time;
* config records: the hyper-parameters (their values as W&B's JSON holds them);
* history records, one per ``wandb.log`` call with its ``_timestamp``: the training metrics make one step event per
  logging point (its time the time since the point before, the first's since the run's start; its ``iterations``
  the steps between), and a later call at a later step (the final evaluation at the training's last step) closes
  the steps after the last point; on the training step a W&B integration logs (``trainer/global_step``,
  Lightning's; ``train/global_step``, the Trainer's; or ``global_step``), else on ``_step`` where it skips values
  (``wandb.log(..., step=global_step)``). Otherwise ``_step`` is W&B's count of ``log`` calls, not the training
  step: such a run has no step events, and ``imported.unknown`` says so. ``val/``, ``val_``, ``eval/``, ``test/``
  ... keys are evaluations;
* stats records (W&B's system sampler): an accelerator's utilisation, memory and power (``gpu.<i>.gpu``,
  ``gpu.<i>.memoryAllocatedBytes``, ``gpu.<i>.powerWatts``) and the process's resident memory
  (``proc.memory.rssMB``) as system samples; the rest named in ``imported.system_metrics``;
* the exit record: exit code 0 lands as a success, any other as a failure, at the start plus W&B's runtime (whole
  seconds) or the last value logged, whichever is later; a run with no exit record (still running, or killed) has
  no stop. An exit code 0 whose history stops short of the length the config plans (``max_steps``, ``epochs``,
  ``max_epochs``, ``num_train_epochs``: ``wandb.finish()`` in a ``finally`` block writes 0 as a failure unwinds)
  is no success: the run's end is unknown (``imported.stop`` says why).

Runs of one ``group`` in folders beside each other, named ``rank<N>`` (W&B's pattern for a run per process), are the
ranks of one training: one honestscale run whose world size is the group's size where the ranks are 0 to N-1.
Elsewhere the world size is the config's ``world_size`` (or ``WORLD_SIZE``), where the script logged it: one
process's run of a larger world (W&B's "rank 0 only") is then one rank reported for all (HS215).

A run resumed with ``wandb.init(id=..., resume="allow")`` writes a run folder per launch, each with the same run id
(offline, W&B marks none of them resumed): the launches beside each other are one run, read from the first
launch's file (the later ones are read with it), its status the last launch's, the time between launches
``paused_s`` on its run_stop (not training), each launch in ``imported.launches``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers import lightning
from honestscale.collector.importers._build import RankEvents, configured_length, configured_world
from honestscale.collector.importers._scalars import Rows, Scalar, add_rows, logged_steps, merged, rows
from honestscale.collector.importers.wandb._records import HEADER, Framing
from honestscale.collector.importers.wandb._run import (
    Run,
    end_of,
    heads,
    joined,
    launch_notes,
    launches,
    paused_s,
    read,
)

FORMAT = "wandb-offline"
LABEL = "W&B offline run (run-*.wandb)"
_STEP_KEYS = ("trainer/global_step", "train/global_step", "global_step")
_EPOCH_KEYS = ("epoch", "train/epoch", "trainer/epoch")
_RANK = re.compile(r"(?:^|[-_ ])(?:rank|worker|proc)[-_]?(\d+)$", re.IGNORECASE)
_GPU = re.compile(r"^gpu\.(\d+)\.(gpu|memoryAllocatedBytes|powerWatts)$")
_GPU_FIELD = {"gpu": "accel_util", "memoryAllocatedBytes": "accel_mem_bytes", "powerWatts": "power_w"}


def sniff(path: Path, head: bytes) -> bool:
    return head.startswith(HEADER)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _scalars(run: Run, step_key: str | None, skipped: set[str]) -> list[Scalar]:
    """Every numeric value of the history as a scalar on the training step (``-1`` where the call has none)."""
    got: list[Scalar] = []
    for number, values in run.history:
        wall = _number(values.get("_timestamp"))
        step = _number(values.get(step_key)) if step_key else None
        for key, value in values.items():
            if key.startswith("_") or key == step_key:
                continue
            v = _number(value)
            if v is None:
                skipped.add(key)
                continue
            got.append(Scalar(number, wall or 0.0, int(step) if step is not None else -1, key, v))
    return got


def _step_key(run: Run) -> str | None:
    """The history's training step: a W&B integration's step key, else ``_step`` where it skips values (the script
    gave ``wandb.log(..., step=global_step)``: W&B's own count of log calls never skips one), else none."""
    key = next((k for k in _STEP_KEYS if any(k in v for _, v in run.history)), None)
    if key is not None:
        return key
    counted = [
        int(v) for _, h in run.history if isinstance(v := h.get("_step"), int) and not isinstance(v, bool)
    ]
    return "_step" if any(b - a > 1 for a, b in itertools.pairwise(counted)) else None


def _short(run: Run, step_key: str | None) -> str | None:
    """Why a run whose exit record says 0 did not run to its end: its history stops short of the length its config
    plans (``wandb.finish()`` in a ``finally`` block writes 0 as the failure unwinds); None where it reaches it or
    the log cannot tell (no planned length, nothing logged on its axis)."""
    planned = configured_length(run.config)
    if planned is None or run.exit_code != 0:
        return None
    key, count, unit = planned
    keys = _EPOCH_KEYS if unit == "epochs" else (step_key,) if step_key else ()
    reached = [v for _, h in run.history for k in keys if (v := _number(h.get(k))) is not None]
    if not reached:
        return None
    last = max(reached)
    # epochs are logged from 0 (a loop's index, Lightning's) or as the epochs done (the Trainer's): short only where
    # neither reading reaches the plan
    if last >= (count - 1 if unit == "epochs" else count):
        return None
    return (
        f"W&B's exit record says 0, but the history stops at {unit[:-1]} {last:g} of the {count} its config plans "
        f"({key}): wandb.finish() writes 0 as a failure unwinds (a finally block); how the training ended is not "
        "in the log"
    )


def _group(path: Path, run: Run) -> tuple[int, int | None, str, str | None]:
    """This run's rank, the group's world size, what identifies the training, and how the world is known: the runs
    of its group in the folders beside its own, each named rank<N>."""
    mine = _RANK.search(run.name)
    if not run.group or mine is None:
        return 0, None, f"{run.project}/{run.run_id}", None
    folder = path.parent.parent
    ranks = _members(folder, path).get((run.project, run.group), {})
    identity = f"{run.project}/{run.group}/" + ",".join(f"{r}:{ranks[r]}" for r in sorted(ranks))
    world = len(ranks) if sorted(ranks) == list(range(len(ranks))) else None
    how = f"W&B group {run.group!r}: runs rank0 to rank{world - 1} beside each other" if world else None
    return int(mine.group(1)), world, identity, how


def _members(folder: Path, mine: Path) -> dict[tuple[str, str], dict[int, str]]:
    """Every group's runs named rank<N> in the run folders of ``folder`` (``wandb/``), by project and group."""
    found: dict[tuple[str, str], dict[int, str]] = {}
    for head in heads(folder, mine):
        if head.group and (m := _RANK.search(head.name)):
            found.setdefault((head.project, head.group), {})[int(m.group(1))] = head.run_id
    return found


def _system(rank: RankEvents, run: Run) -> tuple[int, list[str]]:
    """Accelerator samples and the process's resident memory as system events; the other statistics' names."""
    other: set[str] = set()
    landed = 0
    for number, time, values in run.stats:
        devices: dict[int, dict[str, object]] = {}
        host: dict[str, object] = {}
        for key, value in values.items():
            v = _number(value)
            m = _GPU.match(key)
            if m and v is not None and math.isfinite(v) and v >= 0:
                field_ = _GPU_FIELD[m.group(2)]
                devices.setdefault(int(m.group(1)), {})[field_] = int(v) if field_ == "accel_mem_bytes" else v
            elif key == "proc.memory.rssMB" and v is not None and math.isfinite(v) and v >= 0:
                host["rss_bytes"] = int(v * 2**20)
            else:
                other.add(key)
        for device, sample in sorted(devices.items()):
            rank.add(number, "system", time, device=device, **sample)
            landed += 1
        if host:
            rank.add(number, "system", time, **host)
            landed += 1
    return landed, sorted(other)


def _unknown(world: int | None, step_key: str | None, steps: int) -> list[str]:
    unknown = []
    if world is None:
        unknown.append(
            "world_size (a W&B run does not say how many processes trained; a run per process in one group, each "
            "named rank<N>, says it)"
        )
    if step_key is None:
        unknown.append(
            "the training step (no trainer/global_step, train/global_step or global_step was logged; _step is W&B's "
            "count of log calls): no step events"
        )
    elif steps:
        unknown += [
            "each step's own time (one step event per logging interval, its iterations the steps it covers)",
            "the time of the steps up to the first logging point (it opens the clock)",
        ]
    return [*unknown, "samples per step", "accelerator"]


def _rows(
    out: Parsed, parts: list[Run], step_key: str | None, skipped: set[str]
) -> tuple[Rows, list[lightning.Step]]:
    """Each launch's rows and logging intervals, the first interval of each opened by its launch's start and counted
    from the step the launch before it reached; as one run's."""
    got, steps, reached = [], [], None
    for part in parts:
        mine = rows(out, _scalars(part, step_key, skipped))
        if step_key:
            steps += logged_steps(out, mine, opened=part.start, from_step=reached)
        reached = max((r.step for r in mine.rows if r.step is not None), default=reached)
        got.append(mine)
    return merged(got), steps


def _said(out: Parsed, data: bytes, framing: Framing) -> None:
    """What the framing could not read: each damaged chunk by its byte, and the bytes after the last record."""
    for offset, why in framing.bad:
        out.bad.append(BadLine(offset, f"byte {offset}", f"{why}: the records after it are not read"))
    if data[framing.read_bytes :].strip(b"\0"):  # more than the last block's zero padding
        out.warnings.append(
            f"the records end at byte {framing.read_bytes:,} of {len(data):,}: the rest is not read"
        )


def _imported(
    run: Run, rank_no: int, world: int | None, grouped: bool, how: str | None, step_key: str | None, got: Rows,
    skipped: set[str], steps: int, samples: int, other: list[str], short: str | None,
) -> dict[str, object]:  # fmt: skip
    """What the run's ``imported`` record says: the tool, whose ranks, the step key, what it cannot tell."""
    return {
        "tool": f"Weights & Biases offline run {run.run_id} (project {run.project!r}, wandb {run.producer.split('+')[0]})",
        "ranks_in_log": f"rank {rank_no} of {world} (one W&B run per process in group {run.group!r})"
        if world and grouped
        else f"the process that logged the run, of {world} ({how})"
        if world
        else "the process that logged the run",
        "wandb_run": run.run_id,
        "project": run.project or None,
        "group": run.group or None,
        "job_type": run.job_type or None,
        "step_key": step_key,
        "metrics": sorted(got.trained),
        "not_numbers": sorted(skipped),
        "system_metrics": {"samples": samples, "not_landed": other},
        "world_size_from": how,
        "clock": "each log call's _timestamp (the logging process's time.time()); the run's start as W&B recorded it; "
        "its end the start plus W&B's runtime (whole seconds), or the last value it logged where that is later",
        "unknown": _unknown(world, step_key, steps),
        "stop": short
        if run.exit_code is not None
        else "no exit record: the run was still running, or was killed",
    }


def _launches(out: Parsed, path: Path, run: Run) -> list[Run] | None:
    """Every launch of the run, read on from this file, where it is the first (W&B writes a run folder per
    launch of a resumed run, with one run id); None where a launch before it reads this one with it."""
    order = launches(path, run)
    if path != order[0]:
        out.read_with = order[0]
        out.notes.append(
            f"a later launch of W&B run {run.run_id} (resumed with its id): read with its first launch's file, in "
            f"{order[0].parent.name}"
        )
        return None
    parts = [run]
    for later in order[1:]:
        more, framing = later.read_bytes(), Framing()
        parts.append(read(more, framing, base=parts[-1].records + 1))
        _said(out, more, framing)
    return parts


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    del text  # binary: read from the path record by record
    out = Parsed()
    data = path.read_bytes()
    framing = Framing()
    run = read(data, framing)
    _said(out, data, framing)
    if not run.run_id and run.records == 0 and not framing.bad:
        out.nothing_to_land = (
            "W&B's header alone, no record: its process was stopped before W&B wrote one (as torchrun's SIGTERM "
            "stops the other ranks when one fails); what it trained is in no file"
        )
        return out
    if not run.run_id:
        out.warnings.append("no run record: no run")
        return out
    parts = _launches(out, path, run)
    if parts is None:
        return out
    run, order = joined(parts), launches(path, run)
    step_key = _step_key(run)
    skipped: set[str] = set()
    got, steps = _rows(out, parts, step_key, skipped)
    rank_no, world, identity, how = _group(path, run)
    grouped = world is not None  # the world from the group's runs, else from the config
    if world is None and (said := configured_world(run.config)) is not None:
        world, how = said[0], f"the run's config: {said[1]} = {said[0]}"
    digest = hashlib.sha1(identity.encode(), usedforsecurity=False).hexdigest()[:16]
    rank = RankEvents(f"wandb:{digest}", rank_no)
    start = run.start if run.start is not None else min(got.walls.values(), default=0.0)
    start_event = rank.add(
        1,
        "run_start",
        start,
        campaign=campaign or run.project or None,
        name=run.group or run.name,
        purpose="final",
        framework=run.framework,
        scope="end_to_end",
        world_size=world,
        hyperparameters={k: v for k, v in run.config.items() if isinstance(v, int | float | str | bool)}
        or None,
        host=run.host or None,
    )
    add_rows(rank, got, steps, warmup_known=False)
    samples, other = _system(rank, run)
    short = _short(run, step_key)
    if run.exit_code is not None and short is None:
        status = "success" if run.exit_code == 0 else "failed"
        # W&B's runtime is whole seconds: the run ended no earlier than the last thing it logged
        last = end_of(parts[-1]) or start
        paused = paused_s(parts)
        rank.add(run.records + 1, "run_stop", last, status=status, **({"paused_s": paused} if paused else {}))
    imported = _imported(
        run, rank_no, world, grouped, how, step_key, got, skipped, len(steps), samples, other, short
    )
    if len(parts) > 1:
        imported["launches"] = launch_notes(parts, order)
    start_event["imported"] = imported
    out.events = rank.numbered()
    out.notes.append(
        f"W&B run {run.run_id} ({run.name!r}{', group ' + repr(run.group) if run.group else ''}): {len(run.history)} "
        f"log calls, {len(steps)} step events on {step_key or 'no training step'}, {samples} system samples"
    )
    return out
