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
import os
import re
from dataclasses import dataclass
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers import lightning
from honestscale.collector.importers._scalars import SUMMARY, Rows, Scalar, logged_steps
from honestscale.collector.importers.tensorboard._load import Log, read_folder

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
    trained = [
        s
        for s in log.scalars
        if s.tag.startswith("train/") and not SUMMARY.match(s.tag) and s.tag != "train/epoch"
    ]
    if not isinstance(args, dict) or not trained or log.created is None:
        return None
    args.pop("logging_dir", None)
    steps = [s.step for s in trained]
    end = max(s.wall for s in log.scalars)
    return Launch(files[0], log, json.dumps(args, sort_keys=True), min(steps), max(steps), log.created, end)


Signature = tuple[tuple[str, int, int], ...]  # a folder's event files: name, size, modification time


@dataclass
class _Scan:
    """``runs/`` as it was read last: its own modification time (a folder added or removed changes it), each
    folder's event files as they were, and the trainings they make."""

    runs: Path
    stamp: int
    folders: dict[Path, Signature]
    chains: dict[Path, tuple[Launch, ...]]  # a folder's training, where it has more than one launch


_last: list[_Scan] = []  # the last scan (the files of one runs/ are parsed one after another)


def _signature(folder: Path) -> Signature:
    with os.scandir(folder) as entries:
        found = [
            (e.name, (st := e.stat()).st_size, st.st_mtime_ns)
            for e in entries
            if e.name.startswith("events.out.tfevents.") and e.is_file()
        ]
    return tuple(sorted(found))


def chain(path: Path) -> list[Launch]:
    """The launches of the training ``path``'s folder belongs to, in order, where it has more than one; else [].

    ``runs/`` is read once for all its files (k folders: k reads, not k squared): again where a folder was added or
    removed (its modification time), or where a file of this folder's training, or of this folder, changed."""
    runs = path.parent.parent
    if runs.name != "runs":
        return []
    stamp = runs.stat().st_mtime_ns
    scan = _last[0] if _last and _last[0].runs == runs and _last[0].stamp == stamp else None
    if scan is not None:
        mine = scan.chains.get(path.parent, ())
        kept = {path.parent, *(x.path.parent for x in mine)}
        if path.parent not in scan.folders or any(_signature(d) != scan.folders.get(d) for d in kept):
            scan = None
    if scan is None:
        scan = _scan(runs, stamp)
        _last[:] = [scan]
    return list(scan.chains.get(path.parent, ()))


def _scan(runs: Path, stamp: int) -> _Scan:
    """Every folder of ``runs/`` with event files read as a launch, the launches joined into trainings (a lone
    launch's values are not kept: nobody reads them from here)."""
    with os.scandir(runs) as entries:
        folders = {Path(e.path): sig for e in entries if e.is_dir() and (sig := _signature(Path(e.path)))}
    read = (_launch([d / name for name, _, _ in sig]) for d, sig in folders.items())
    launches = sorted((x for x in read if x is not None), key=lambda x: x.start)
    by_args: dict[str, list[list[Launch]]] = {}
    for x in launches:
        same = by_args.setdefault(x.args, [])
        into = next((c for c in same if x.start >= c[-1].end and x.first > c[-1].first), None)
        if into is None:
            same.append([x])
        else:
            into.append(x)
    chains = {x.path.parent: tuple(c) for cs in by_args.values() for c in cs if len(c) > 1 for x in c}
    return _Scan(runs, stamp, folders, chains)


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
