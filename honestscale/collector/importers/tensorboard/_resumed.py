"""The Hugging Face Trainer's launches of one training: a training killed and resumed from its checkpoint into the
same ``output_dir`` (``trainer.train(resume_from_checkpoint=...)``) writes each launch's TensorBoard log into a folder
of its own under the Trainer's default logging dir, ``<output_dir>/runs/<date>_<host>/``. They are one run.

A later folder resumes an earlier one where both are the Trainer's (its ``args`` text), their arguments are the same
(the logging dir aside), the later starts (its writer's first record) after the earlier's last value, and its first
training step is past the earlier's first (a resumed launch goes on from its checkpoint; a repetition, or the same
script run again, starts from the first step again: another run). The step a launch goes on from is the checkpoint
it resumed (the largest ``<output_dir>/checkpoint-<N>`` before its first logged step), else the earlier launch's last
logged step (said). Each launch's first interval is opened by its own writer and holds its start-up (warm-up).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers import lightning
from honestscale.collector.importers._scalars import Rows, Scalar, logged_steps
from honestscale.collector.importers.tensorboard._load import Log, events_in, read_folder

_SUMMARY = re.compile(r"^train/(train_\w+|total_flos|epoch)$")
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class Launch:
    path: Path  # the first event file of its folder
    log: Log
    args: str  # the Trainer's arguments, the logging dir aside
    first: int  # its first and last training step logged
    last: int
    start: float  # its writer's first record
    end: float  # its last value


def _launch(files: list[Path]) -> Launch | None:
    log = read_folder(Parsed(), files)
    text = log.texts.get("args")
    try:
        args = json.loads(text) if text else None
    except ValueError:
        args = None
    trained = [s for s in log.scalars if s.tag.startswith("train/") and not _SUMMARY.match(s.tag)]
    if not isinstance(args, dict) or not trained or log.created is None:
        return None
    args.pop("logging_dir", None)
    steps = [s.step for s in trained]
    end = max(s.wall for s in log.scalars)
    return Launch(files[0], log, json.dumps(args, sort_keys=True), min(steps), max(steps), log.created, end)


def chain(path: Path) -> list[Launch]:
    """The launches of the training ``path``'s folder belongs to, in order, where it has more than one; else []."""
    runs = path.parent.parent
    if runs.name != "runs":
        return []
    folders = sorted(d for d in runs.iterdir() if d.is_dir() and events_in(d))
    if len(folders) < 2:
        return []
    launches = sorted((x for d in folders if (x := _launch(events_in(d)))), key=lambda x: x.start)
    chains: list[list[Launch]] = []
    for x in launches:
        into = next(
            (c for c in chains if c[-1].args == x.args and x.start >= c[-1].end and x.first > c[-1].first),
            None,
        )
        if into is None:
            chains.append([x])
        else:
            into.append(x)
    mine = next((c for c in chains if any(x.path.parent == path.parent for x in c)), [])
    return mine if len(mine) > 1 else []


def resumed_from(launch: Launch, before: Launch) -> tuple[int, str]:
    """The step ``launch`` went on from, and how it is known."""
    output_dir = launch.path.parent.parent.parent
    saved = [int(m.group(1)) for d in output_dir.iterdir() if d.is_dir() and (m := _CHECKPOINT.match(d.name))]
    found = [n for n in saved if n < launch.first]
    if found:
        return max(found), f"its checkpoint {output_dir.name}/checkpoint-{max(found)}"
    return before.last, "the launch before's last logged step (no checkpoint folder beside the logs)"


def numbered(launches: list[Launch]) -> list[list[Scalar]]:
    """Each launch's scalars, their records numbered on across the launches (the quarantine's and the events'
    lines)."""
    base, got = 0, []
    for x in launches:
        got.append([Scalar(s.record + base, s.wall, s.step, s.tag, s.value) for s in x.log.scalars])
        base += x.log.records
    return got


def steps(out: Parsed, launches: list[Launch], parts: list[Rows]) -> tuple[list[lightning.Step], list[str]]:
    """Every launch's step events, each launch's first interval opened by its own writer (from the step it went on
    from), and a line per launch for ``imported.launches``."""
    got: list[lightning.Step] = []
    said: list[str] = []
    base = 0
    for i, (x, part) in enumerate(zip(launches, parts, strict=True)):
        went_on = resumed_from(x, launches[i - 1]) if i else None
        mine = logged_steps(out, part, opened=x.start, from_step=went_on[0] if went_on else None)
        got += mine
        how = f", resumed from step {went_on[0]} ({went_on[1]})" if went_on else ""
        said.append(
            f"{x.path.parent.name}/{x.path.name} (records {base + 1}-{base + x.log.records}): steps {x.first} to "
            f"{x.last} logged, {sum(s.iterations for s in mine)} counted{how}; its writer opened at {x.start:.3f}, "
            f"its last value at {x.end:.3f}"
        )
        base += x.log.records
    return got, said
