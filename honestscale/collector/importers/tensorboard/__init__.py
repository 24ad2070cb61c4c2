"""TensorBoard event files (``events.out.tfevents.*``), read with the ``tensorboard`` package's own loader.

Written by Lightning's default logger (``TensorBoardLogger``, global rank 0 only, with ``hparams.yaml`` beside), by
the Hugging Face Trainer's ``report_to=["tensorboard"]`` (process 0 only: ``train/loss``, ``eval/*``, its own
end-of-training rates ``train/train_*``, its arguments as text), and by a loop's own ``SummaryWriter`` (one per rank
where every rank logs, each in a folder ``rank<N>``). Every scalar carries the wall time its process logged it at
(``time.time()``), so, unlike a CSV export, the log has a clock:

* the run starts at the writer's first record (``file_version``) and each event sits at its scalar's wall time;
* steps: where Lightning's ``ThroughputMonitor`` logged ``train/time`` (rank 0's training time, validation taken
  out), one step event per logged row from its differences, as the CSVLogger reader does; else one step event per
  logging point of a training metric, its time the wall time since the point before and its ``iterations`` the
  steps between (a logging interval is no step time; validation inside an interval is in it). A loop's writer
  opens the first interval with its first record (its steps from 0 where the first point is at step 0: one step
  done), and a later value at a later step (the final validation) closes the steps after the last point; for
  Lightning's and the Trainer's writers the first point opens the clock;
* evaluations: ``val_*``, ``val/*``, ``test_*``, ``test/*`` and the Trainer's ``eval/*`` (its rates and runtimes are
  no quality), at their step;
* the world size where the log says it: the number of ``rank<N>`` folders (0 to N-1) beside each other, or
  ThroughputMonitor's global over per-device rate; else unknown, and ``imported.unknown`` says why (HS215 reads it);
* hyper-parameters from the hparams plugin (``log_hyperparams``, ``add_hparams``: its sub-folder's file is read with
  the log above it), Lightning's ``hparams.yaml`` and the Trainer's ``args`` text;
* ``add_scalars(main, {key: value})``'s sub-folders ``<main>_<key>`` (written by the same process: its host and pid
  in the files' names), which TensorBoard shows as runs of their own, are read with the writer's own file as one
  training, each value named ``<key>/<main>`` (``loss_val``'s ``loss`` is ``val/loss``, a validation loss);
* the tool's own rates (ThroughputMonitor's global rate, the Trainer's ``train_samples_per_second``) as claims;
* the Trainer's launches of one training killed and resumed into the same ``output_dir`` (a folder each under
  ``<output_dir>/runs/``) as one run (``_resumed``), and Keras' two writers of one ``fit`` as one (``_keras``).

A record the loader cannot read ends what is read of the file; the bytes after it are said in a warning. A value
that is no finite number, or one its tag cannot hold, goes to the quarantine by record and tag.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers import lightning
from honestscale.collector.importers._build import RankEvents, run_id
from honestscale.collector.importers._scalars import Rows, add_rows, logged_steps, merged, rows, trainer_claim
from honestscale.collector.importers.tensorboard import _keras, _resumed
from honestscale.collector.importers.tensorboard._load import Log, append, events_in, load, read_folder

FORMAT = "tensorboard"
LABEL = "TensorBoard event file"
_RANK = re.compile(r"^(?:rank|worker|proc)[_-]?(\d+)$", re.IGNORECASE)
_TIMESTAMP = re.compile(r"^\d{9,}(\.\d+)?$")  # add_hparams' sub-folder: str(time.time())
_WRITER = re.compile(r"^events\.out\.tfevents\.\d+\.(.+)\.\d+$")  # <time>.<host>.<pid>.<n>: host.pid


def sniff(path: Path, head: bytes) -> bool:
    """TFRecord framing (an 8-byte length and its CRC) around the writer's first record, its file_version."""
    return len(head) >= 24 and b"brain.Event:" in head[12:80]


def _group(path: Path) -> tuple[int, int | None, str, str | None]:
    """This file's rank, the world size its folder tells, what identifies the run, and how the world is known:
    a ``rank<N>`` folder with ``rank<M>`` folders beside it is one rank of a run whose files are all of theirs."""
    m = _RANK.match(path.parent.name)
    if m is None:
        return 0, None, path.name, None
    ranks: dict[int, list[Path]] = {}
    for folder in path.parent.parent.iterdir():
        if (r := _RANK.match(folder.name)) and (files := events_in(folder)):
            ranks[int(r.group(1))] = files
    identity = "|".join(sorted(f"{r}/{f.name}" for r, files in ranks.items() for f in files))
    world = len(ranks) if sorted(ranks) == list(range(len(ranks))) else None
    how = (
        f"{world} folders rank0 to rank{world - 1} beside each other, each with its own event file"
        if world is not None
        else None
    )
    return int(m.group(1)), world, identity, how


def _owner(path: Path) -> Path | None:
    """The event file an ``add_hparams`` file belongs to: PyTorch's SummaryWriter writes it into a sub-folder named
    by the time, beside the run's own file."""
    if not _TIMESTAMP.match(path.parent.name):
        return None
    above = events_in(path.parent.parent)
    return above[0] if above else None


def _writer(path: Path) -> str | None:
    """The process that wrote the file: PyTorch's SummaryWriter names it ``events.out.tfevents.<time>.<host>.<pid>.<n>``."""
    m = _WRITER.match(path.name)
    return m.group(1) if m else None


def _scalars_parent(path: Path) -> Path | None:
    """The run's own event file an ``add_scalars`` file belongs to: PyTorch's ``add_scalars(main, {key: value})``
    writes each key into a sub-folder ``<main>_<key>`` beside the writer's own file, from the same process (its host
    and pid in both files' names). TensorBoard shows each sub-folder as a run of its own; it is one training."""
    if _TIMESTAMP.match(path.parent.name) or (writer := _writer(path)) is None:
        return None
    above = [f for f in events_in(path.parent.parent) if _writer(f) == writer]
    return above[0] if above else None


def _add_scalars(out: Parsed, path: Path, log: Log) -> None:
    """The ``add_scalars`` sub-folders' values into the run's log, each tag named ``<key>/<main>`` (``loss_val``'s
    ``loss``: ``val/loss``, a validation loss; ``loss_train``'s: ``train/loss``), records numbered on, all in the
    order of their wall times (each sub-folder's file is written beside the run's own, value by value)."""
    if (writer := _writer(path)) is None:
        return
    folders = sorted(
        f
        for f in path.parent.iterdir()
        if f.is_dir() and not _TIMESTAMP.match(f.name) and not _RANK.match(f.name)
    )
    said: list[str] = []
    for folder in folders:
        for file in (f for f in events_in(folder) if _writer(f) == writer):
            base, tags = append(out, log, file, functools.partial(_key_tag, folder.name))
            renamed = ", ".join(f"{a} as {b}" for a, b in tags.items())
            said.append(f"{folder.name}/{file.name} ({renamed}): records {base + 1}-{log.records}")
    if said:
        log.scalars.sort(key=lambda s: s.wall)  # stable: a record's own order kept at a tie
        out.notes.append(f"add_scalars' sub-folders read with this run (one training): {'; '.join(said)}")


def _key_tag(folder: str, tag: str) -> str:
    """``add_scalars``' tag ``<key>/<main>`` of a value of ``main`` in the sub-folder ``<main>_<key>``."""
    key = folder.removeprefix(f"{tag}_") if folder.startswith(f"{tag}_") else folder
    return f"{key}/{tag}"


def _hparams(path: Path, log: Log) -> dict[str, object]:
    """The hparams plugin's, add_hparams' files' below, Lightning's hparams.yaml and the Trainer's ``args``."""
    got: dict[str, object] = dict(log.hparams)
    args = log.texts.get("args")
    if args:
        try:
            parsed = json.loads(args)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            got.update({str(k): v for k, v in parsed.items() if isinstance(v, int | float | str | bool)})
    got.update(lightning.hparams_yaml(path))  # its integers stay integers (the plugin's numbers are doubles)
    for below in sorted(p for p in path.parent.iterdir() if p.is_dir() and _TIMESTAMP.match(p.name)):
        for file in events_in(below):
            got.update(load(file).hparams)
    return got


def _tool(path: Path, log: Log, tags: set[str], got: Rows) -> str:
    """Who wrote the file: Lightning (its placeholder ``hp_metric``, ThroughputMonitor's counts, ``hparams.yaml``
    beside it), the Trainer (its ``args`` text, ``train/epoch``, its end-of-training summary), else a loop."""
    if "hp_metric" in tags or any(r.monitor for r in got.rows) or path.with_name("hparams.yaml").is_file():
        return "lightning"
    if "args" in log.texts or "train/epoch" in tags or got.final:
        return "hf"
    return "loop"


_TOOLS = {
    "lightning": (
        "Lightning TensorBoardLogger",
        "global rank 0 (Lightning logs on rank 0 only; metrics logged "
        "with sync_dist are the mean over ranks, ThroughputMonitor's counts rank 0's alone)",
    ),
    "hf": (
        "Hugging Face Trainer (report_to tensorboard)",
        "process 0 (the Trainer logs on the main process only)",
    ),
    "loop": ("a training loop's SummaryWriter", "the process that wrote the file"),
}


def _claims(tool: str, got: Rows) -> dict[str, object] | None:
    if tool == "lightning":
        return lightning.rate_claims(got.rows)
    return trainer_claim(got, "the Trainer's train/train_samples_per_second")


def _unknown(
    tool: str, world: int | None, why_world: str, steps: list[lightning.Step], got: Rows
) -> list[str]:
    unknown = [] if world is not None else [f"world_size ({why_world})"]
    if not steps:
        unknown.append("step times (fewer than two logging points of a training metric)")
    elif not any(r.monitor for r in got.rows):
        unknown += [
            "each step's own time (a scalar is logged every few steps: one step event per logging interval, its "
            "iterations the steps it covers; validation inside an interval is in its time)",
            "the time and samples of the steps up to the first logging point (it opens the clock)",
            "samples per step",
        ]
    elif any(s.iterations > 1 for s in steps):
        unknown.append("each step's own time (ThroughputMonitor logs every log_every_n_steps)")
    if tool != "loop" or world is None:
        unknown.append("the other ranks' numbers")
    return [*unknown, "accelerator", "how the run ended"]


def _world(
    path: Path, tool: str, got: Rows, group: tuple[int, int | None, str, str | None]
) -> tuple[int | None, str]:
    _, world, _, how = group
    if world is not None and how is not None:
        return world, how
    if tool == "lightning":
        return lightning.world_from_rates(
            got.rows, sorted(got.trained | {k for r in got.rows for k in r.monitor})
        )
    if tool == "hf":
        return None, "the Trainer's TensorBoard log does not say how many processes trained"
    return (
        None,
        f"one event file ({path.name}) does not say how many processes trained; a run that logs on "
        "every rank keeps each rank's file in a folder rank<N>",
    )


def _read_with(path: Path, files: list[Path], launches: list[_resumed.Launch]) -> tuple[Path, str] | None:
    """The file ``path`` is read with, and why, where it is one part of a training another file's reading holds:
    a later launch of the Trainer's, a later file of its folder, an ``add_scalars`` sub-folder's."""
    if launches and launches[0].path.parent != path.parent:
        first = launches[0].path
        return first, f"a later launch of the training logged in {first.parent.name}: read with it"
    # TensorBoard's run is a folder: its files are read in order, as one
    if path in files and path != files[0]:
        return files[
            0
        ], f"read with {files[0].name}, the first event file of its folder (one run, as TensorBoard's)"
    if (parent := _scalars_parent(path)) is not None:
        return parent, f"add_scalars' file: its values are read with {parent.name} above it (one training)"
    return None


def _steps(
    out: Parsed, tool: str, log: Log, got: Rows, launches: list[_resumed.Launch], parts: list[Rows]
) -> tuple[list[lightning.Step], list[str]]:
    """The step events, and a line per launch of a resumed training. The writer opens the clock where it is
    created (its file_version record): a loop's, Lightning's and the Trainer's, which open before the training does
    (the interval is warm-up then: the start-up is in it). Each names its steps its own way: Lightning's point at
    step s follows batch s counted from 0 (s + 1 batches), the Trainer's global_step counts the optimizer steps
    done, a loop's as it says (from 0 where its first is 0)."""
    if parts:
        return _resumed.steps(out, launches, parts)
    if any(r.monitor for r in got.rows):
        return lightning.monitor_steps(out, got.rows), []
    opened = log.created if tool in ("loop", "lightning", "hf") else None
    return logged_steps(out, got, opened=opened, from_step=-1 if tool == "lightning" else None), []


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    del text  # binary: read from the path by tensorboard's loader
    out = Parsed()
    if (keras := _keras.files(path)) is not None:
        _keras.read(out, path, *keras, campaign)
        return out
    launches = _resumed.chain(path)  # the Trainer's launches of one resumed training: read with the first
    files = events_in(path.parent)
    if (elsewhere := _read_with(path, files, launches)) is not None:
        out.read_with, why = elsewhere
        out.notes.append(why)
        return out
    log = read_folder(out, files if path in files else [path])
    if log.hparams and (owner := _owner(path)) is not None:
        out.read_with = owner
        out.notes.append(f"add_hparams' file: its hyper-parameters are read with {owner.name} above it")
        return out
    _add_scalars(out, path, log)
    parts = [rows(out, part) for part in _resumed.numbered(launches)] if launches else []
    got = merged(parts) if parts else rows(out, log.scalars)
    every = [s for x in launches for s in x.log.scalars] if launches else log.scalars
    tags, scalars = {s.tag for s in every}, len(every)
    log.scalars = []  # read into rows: not held beside the events (a run of 10^6 values)
    if not got.rows:
        out.warnings.append("no scalar in the file: no run")
        return out
    tool = _tool(path, log, tags, got)
    group = _group(path)
    world, why_world = _world(path, tool, got, group)
    monitored = any(r.monitor for r in got.rows)
    steps, said_launches = _steps(out, tool, log, got, launches, parts)
    t0 = log.created if log.created is not None else min(got.walls.values())
    rank = RankEvents(run_id("tensorboard", group[2]), group[0])
    name = path.parent.name if not _RANK.match(path.parent.name) else path.parent.parent.name
    if tool == "lightning" and name.startswith("version_"):
        name = f"{path.parent.parent.name} {name}"
    tool_name, ranks_in_log = _TOOLS[tool]
    if group[3] is not None:
        ranks_in_log = f"rank {group[0]} of {group[1]} (one SummaryWriter per rank)"
    rank.add(
        1,
        "run_start",
        t0,
        campaign=campaign,
        name=name,
        purpose="final",
        framework="torch",
        scope="end_to_end",
        hyperparameters=_hparams(path, log) or None,
        world_size=world,
        local_batch_size=lightning.local_batch(steps) if monitored else None,
        claims=_claims(tool, got),
        imported={
            "tool": tool_name + (" with ThroughputMonitor" if monitored else ""),
            "ranks_in_log": ranks_in_log,
            "tags": sorted(tags),
            "clock": "each scalar's wall time (the writing process's time.time() when it logged it); the run "
            "starts at the writer's first record",
            "world_size_from": why_world if world is not None else None,
            "unknown": _unknown(tool, world, why_world, steps, got),
            "stop": "an event file does not say how or when the run ended",
            "launches": said_launches or None,
        },
    )
    add_rows(rank, got, steps, warmup_known=monitored)
    out.notes.append(
        f"{scalars:,} scalars in {log.records:,} records ({tool_name}): {len(steps)} step events"
        + (f" (steps {steps[0].step} to {steps[-1].step})" if steps else "")
        + f", world size {world if world is not None else 'unknown'}"
    )
    out.events = rank.numbered()
    return out
