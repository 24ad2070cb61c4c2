"""Hugging Face ``Trainer``'s ``trainer_state.json`` (written by process 0 at every save and at the end).

It holds ``log_history`` (the training loss every ``logging_steps``, ``eval_*`` metrics, and at the end
``train_runtime``, ``train_samples_per_second``, ``train_steps_per_second``, ``train_loss``), ``global_step``,
``max_steps``, ``num_train_epochs`` and ``train_batch_size`` (per device). It does not hold the world size, any
step's time, any other process's numbers, or a wall clock: the run has no world size (unknown), no step events,
and its times are placed from the file's modification time (the end of training) back by ``train_runtime``, the
evaluations at their step's share of it (said in ``imported.clock``). The global batch is
``train_samples_per_second / train_steps_per_second`` (the Trainer divides the same planned samples and steps by
the same runtime); its samples/s are a claim, process 0's. A state saved before the end (a checkpoint's, or a
killed run's) has no ``train_runtime``: the run is left without a stop. A state a resumed training saved at its end
(``train(resume_from_checkpoint=...)``) holds every launch's entries but the last launch's ``train_runtime``:
Transformers 5 divides that launch's steps alone by it, so ``train_steps_per_second x train_runtime`` short of
``global_step`` tells the step it resumed at; the entries before it are placed at that launch's start, the time to
train is that launch's alone, and ``imported.unknown`` says so.

The framework is ``torch`` and the metrics are named as the rules name them (``acc`` -> ``accuracy``), as
honestscale's Trainer callback records the same training (``imported.tool`` names the Trainer): the two records of
one training are then told to be one (collector/_twins.py). A ``train_runtime`` of 0 or less, a NaN or infinite
evaluation and an accuracy outside [0, 1] go to the quarantine by field; rates and runtimes are never a quality.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers._build import (
    RankEvents,
    checked,
    count,
    is_rate,
    number,
    quality_bounds,
    run_id,
)
from honestscale.events import quality_name

FORMAT = "hf-trainer-state"
LABEL = "Hugging Face trainer_state.json"
_TIMINGS = ("_runtime", "_samples_per_second", "_steps_per_second")


def sniff(path: Path, head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and b'"log_history"' in head and b'"global_step"' in head


def _entry_lines(text: str) -> list[int]:
    """The line of each log_history entry (its "step" key: one per entry), in order: one pass over the text, the
    newlines counted between one match and the next (linear in the file, however many entries it has)."""
    start = text.find('"log_history"')
    lines = []
    line, at = 1, 0
    for m in re.finditer(r'^\s*"step": ', text, re.MULTILINE):
        line += text.count("\n", at, m.start())
        at = m.start()
        if m.start() > start:
            lines.append(line)
    return lines


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    try:
        state = json.loads(text)
    except ValueError as exc:
        out.warnings.append(f"not JSON ({exc}): a trainer_state.json cut short? no run")
        return out
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        out.warnings.append("no log_history list: no run")
        return out
    entries = [e for e in history if isinstance(e, dict)]
    lines = _entry_lines(text)
    line_of = {i: lines[i] if i < len(lines) else 1 for i in range(len(entries))}
    end = next((e for e in entries if "train_runtime" in e), None)
    end_line = line_of[entries.index(end)] if end is not None else 1
    runtime = (
        checked(
            out,
            end_line,
            _raw(end),
            "train_runtime",
            end.get("train_runtime"),
            above=0.0,
            what="training time",
        )
        if end is not None
        else None
    )
    untimed = end is not None and runtime is None
    if untimed:
        end = None  # no time to train: the run is left without a stop (said below), never a 0 s success
    sps, steps_ps = (
        (number(end.get("train_samples_per_second")), number(end.get("train_steps_per_second")))
        if end
        else (None, None)
    )
    gbs = _global_batch(sps, steps_ps, count(state.get("train_batch_size"), 1))
    global_step, max_steps = count(state.get("global_step")), count(state.get("max_steps"))
    resumed = _resumed_at(runtime, steps_ps, global_step)
    t_end = path.stat().st_mtime
    t0 = t_end - (runtime or 0.0)
    rank = RankEvents(run_id("hf", json.dumps(entries, sort_keys=True) + str(global_step)), 0)
    local = count(state.get("train_batch_size"), 1)
    claims = (
        {
            "samples_per_s": sps,
            "from": "train_samples_per_second: the planned samples over train_runtime, process 0's",
        }
        if sps
        else None
    )
    rank.add(
        1,
        "run_start",
        t0,
        campaign=campaign,
        name=path.parent.name or "trainer",
        purpose="final",
        framework="torch",
        local_batch_size=local,
        global_batch_size=gbs,
        stop_criterion="samples" if max_steps and gbs else None,
        stop_value=float(max_steps * gbs) if max_steps and gbs else None,
        scope="end_to_end",
        claims=claims,
        hyperparameters={
            k: state[k]
            for k in (
                "logging_steps",
                "max_steps",
                "num_train_epochs",
                "eval_steps",
                "save_steps",
                "total_flos",
            )
            if isinstance(state.get(k), int | float)
        },
        imported={
            "tool": "Hugging Face Trainer",
            "ranks_in_log": "process 0",
            "clock": "no wall clock in trainer_state.json: the end is the file's modification time, the start "
            "train_runtime before it, each evaluation at its step's share of train_runtime",
            "global_batch_from": "train_samples_per_second / train_steps_per_second" if gbs else None,
            "unknown": [
                "world_size (not in trainer_state.json)",
                "step times",
                "the other processes' numbers",
                "accelerator",
                "model shape",
                *_before_resume(out, resumed, global_step),
            ],
        },
    )
    for i, e in enumerate(entries):
        _evaluations(
            out,
            rank,
            e,
            line_of[i],
            t0 + (runtime or 0.0) * _share(count(e.get("step")), global_step, resumed),
        )
    if end is not None:
        rank.add(
            end_line,
            "run_stop",
            t_end,
            status="success",
            train_loss=checked(out, end_line, _raw(end), "train_loss", end.get("train_loss"), what="loss"),
        )
    elif untimed:
        out.warnings.append(
            "train_runtime is no time (quarantined, with its line): the run is left without a stop"
        )
    else:
        out.notes.append(
            f"no train_runtime in log_history: a state saved at step {global_step} of {max_steps} (a checkpoint's, "
            "or a run killed before its end): the run is left without a stop"
        )
    out.events = rank.numbered()
    return out


def _raw(entry: dict[str, object]) -> str:
    return json.dumps(entry, sort_keys=True, default=str)


def _share(step: int | None, global_step: int | None, resumed: int | None = None) -> float:
    """Where a step sits in the last launch, as a share of train_runtime (no step: at the end; a step before the
    launch resumed: at its start)."""
    if step is None or not global_step:
        return 1.0
    first = resumed or 0
    return max(0.0, (step - first) / (global_step - first))


def _before_resume(out: Parsed, resumed: int | None, global_step: int | None) -> list[str]:
    """What a resumed training's state cannot tell (said in ``imported.unknown`` and in the notes)."""
    if resumed is None or global_step is None:
        return []
    out.notes.append(
        f"resumed at step {resumed}: train_runtime is the last launch's ({global_step - resumed} of {global_step} "
        "steps); the entries before it are placed at that launch's start"
    )
    return [
        f"the launches before step {resumed} (the training was resumed from it: train_steps_per_second x "
        f"train_runtime is {global_step - resumed} of its {global_step} steps): their time is not in "
        "trainer_state.json, so the time to train is the last launch's alone, and what they logged is placed at its "
        "start"
    ]


def _resumed_at(runtime: float | None, steps_ps: float | None, global_step: int | None) -> int | None:
    """The step the last launch resumed from, where the summary says it: Transformers 5 divides the steps this
    launch trained (``global_step`` less the step it resumed at) by its runtime; a launch that trained every step
    (or a Transformers 4 summary, which divides the planned steps) is no resume. The rounding of both to 3 and 4
    decimals is allowed for."""
    if not runtime or not steps_ps or not global_step:
        return None
    trained = steps_ps * runtime
    slack = 0.5 + runtime * 0.0005 + steps_ps * 0.00005
    if trained >= global_step - slack:
        return None
    return global_step - round(trained)


def _evaluations(out: Parsed, rank: RankEvents, entry: dict[str, object], line: int, when: float) -> None:
    """An entry's eval_*/test_* qualities as evaluations; rates and runtimes are no quality, an impossible value
    (NaN, an accuracy past 1) goes to the quarantine by field."""
    step = count(entry.get("step"))
    # the Trainer's epoch is a fraction (1.5: half way through the second); a negative one goes to the quarantine
    epoch = checked(out, line, _raw(entry), "epoch", entry.get("epoch"), least=0.0, what="epoch")
    for key, value in entry.items():
        for prefix, split in (("eval_", "validation"), ("test_", "test")):
            if not key.startswith(prefix) or key.endswith(_TIMINGS) or is_rate(key):
                continue
            metric = quality_name(key.removeprefix(prefix))
            least, most = quality_bounds(metric)
            v = checked(out, line, _raw(entry), key, value, least=least, most=most, what=metric)
            if v is not None:
                rank.add(
                    line,
                    "eval",
                    when,
                    split=split,
                    metric=metric,
                    value=v,
                    epoch=int(epoch) if epoch is not None else None,
                    step=step,
                )


def _global_batch(sps: float | None, steps_ps: float | None, local: int | None) -> int | None:
    """``train_samples_per_second / train_steps_per_second``, where it can be told: the Trainer rounds both to 3
    decimals, so the ratio is kept only when that rounding cannot move it by half a sample and it is a whole
    multiple of the per-device batch (else unknown)."""
    if not sps or not steps_ps or not local or sps <= 0 or steps_ps <= 0:
        return None
    ratio = sps / steps_ps
    if not math.isfinite(ratio):
        return None
    gbs = round(ratio)
    error = ratio * (0.0005 / sps + 0.0005 / steps_ps)  # the largest change the rounding can make
    return gbs if gbs >= local and gbs % local == 0 and error + abs(ratio - gbs) < 0.5 else None
