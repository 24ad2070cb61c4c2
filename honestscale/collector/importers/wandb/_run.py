"""One W&B offline run file read into its parts (``read``), and the heads of every run file beside it (``heads``):
what a group's ranks and a resumed run's launches are found by."""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.collector.importers.wandb._records import Framing, records

_HEAD = 1 << 16  # bytes of a run file that hold its run record (W&B writes it first)


@dataclass
class Run:
    path: Path | None = None
    run_id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    project: str = ""
    host: str = ""
    start: float | None = None
    producer: str = ""
    config: dict[str, object] = field(default_factory=dict)
    history: list[tuple[int, dict[str, object]]] = field(
        default_factory=list
    )  # (record, the log call's values)
    stats: list[tuple[int, float, dict[str, object]]] = field(default_factory=list)  # (record, time, values)
    exit_code: int | None = None
    runtime_s: int | None = None
    framework: str = "unknown"  # from wandb's telemetry of the modules the script imported
    records: int = 0  # the records read (the next launch's are numbered on from here)

    def last_time(self) -> float | None:
        """When the run last logged (a history call's ``_timestamp``, a statistics sample)."""
        times = [float(t) for _, h in self.history if isinstance(t := h.get("_timestamp"), int | float)]
        times += [t for _, t, _ in self.stats]
        return max(times, default=None)


def _key(item: Any) -> str:
    # history and summary items have nested_key; config and stats items not
    nested = getattr(item, "nested_key", None)
    return "/".join(nested) if nested else str(item.key)


def _values(items: Any) -> dict[str, object]:
    got: dict[str, object] = {}
    for item in items:
        try:
            got[_key(item)] = json.loads(item.value_json)
        except ValueError:
            got[_key(item)] = item.value_json
    return got


def read(data: bytes, framing: Framing, head_only: bool = False, base: int = 0) -> Run:
    """The run file's records, numbered from ``base`` + 1; ``head_only``: up to its run record."""
    run = Run()
    for n, record in records(data, framing):
        number = base + n
        run.records = number
        kind = record.WhichOneof("record_type")
        if kind == "header":
            run.producer = record.header.version_info.producer
        elif kind == "run":
            r = record.run
            run.run_id, run.name, run.group, run.job_type = r.run_id, r.display_name, r.run_group, r.job_type
            run.project, run.host = r.project, r.host
            run.start = r.start_time.seconds + r.start_time.nanos / 1e9 if r.HasField("start_time") else None
            run.config.update({k: v for k, v in _values(r.config.update).items() if k != "_wandb"})
            if head_only:
                break
        elif kind == "config":
            run.config.update({k: v for k, v in _values(record.config.update).items() if k != "_wandb"})
        elif kind == "history":
            run.history.append((number, _values(record.history.item)))
        elif kind == "stats":
            t = record.stats.timestamp
            run.stats.append((number, t.seconds + t.nanos / 1e9, _values(record.stats.item)))
        elif kind == "telemetry":
            imported = record.telemetry.imports_init
            if imported.torch or imported.lightning or imported.pytorch_lightning or imported.transformers:
                run.framework = "torch"
            elif imported.tensorflow or imported.keras:
                run.framework = "tensorflow"
        elif kind == "exit":
            run.exit_code, run.runtime_s = record.exit.exit_code, record.exit.runtime
    return run


def heads(folder: Path, mine: Path | None = None) -> list[Run]:
    """The head (up to the run record) of every run file in the run folders of ``folder`` (``wandb/``), in the
    order of their names (each begins with its time); a file of another kind, or cut before its run record, is
    none of them. ``mine``: the file asking, listed again where the listing lacks it (its head written after)."""
    got = _heads(folder, folder.stat().st_mtime_ns)
    if mine is not None and all(h.path != mine for h in got):
        _heads.cache_clear()
        got = _heads(folder, folder.stat().st_mtime_ns)
    return list(got)


@functools.lru_cache(maxsize=4)
def _heads(folder: Path, stamp: int) -> tuple[Run, ...]:
    """Each file's head read once per listing (``stamp``: the folder's modification time, which a new run folder
    changes), not once per run of a project of a thousand."""
    del stamp
    found = []
    for other in sorted(folder.glob("*/run-*.wandb")):
        try:
            with other.open("rb") as fh:
                head = read(fh.read(_HEAD), Framing(), head_only=True)
        except Exception:  # a file of another kind, or cut: not a run the folder can count on
            continue
        if head.run_id:
            head.path = other
            found.append(head)
    return tuple(found)


def launches(path: Path, run: Run) -> list[Path]:
    """The files of every launch of ``run`` beside it (W&B writes a new run folder, with the same run id, for each
    launch that resumes a run: ``wandb.init(id=..., resume=...)``), by their start: ``[path]`` where it is alone."""
    same = [
        h for h in heads(path.parent.parent) if (h.project, h.run_id) == (run.project, run.run_id) and h.path
    ]
    same.sort(key=lambda h: (h.start is None, h.start or 0.0, str(h.path)))
    starts = [h.start for h in same]
    if None in starts or len(set(starts)) < len(starts):  # one launch copied twice: a conflict, not a resume
        return [path]
    got = [h.path for h in same if h.path is not None]
    return got if path in got else [path]


def end_of(run: Run) -> float | None:
    """When a launch ended: its start plus W&B's whole-second runtime, or the last value it logged, the later."""
    ends = [
        t for t in (run.last_time(), None if run.start is None else run.start + (run.runtime_s or 0)) if t
    ]
    return max(ends, default=None)


def paused_s(parts: list[Run]) -> float:
    """The seconds between one launch's end and the next's start, summed: no training happened in them."""
    gaps = [(b.start or 0.0) - (end_of(a) or b.start or 0.0) for a, b in itertools.pairwise(parts)]
    return round(sum(max(g, 0.0) for g in gaps), 6)


def joined(parts: list[Run]) -> Run:
    """A resumed run's launches as one run: the first's start and identity, everyone's history and statistics in
    order, the config as the last launch left it, the last launch's exit."""
    first, last = parts[0], parts[-1]
    run = Run(first.path, first.run_id, first.name, first.group, first.job_type, first.project, first.host,
              first.start, first.producer, {}, [], [], last.exit_code, last.runtime_s, first.framework, last.records)  # fmt: skip
    for part in parts:
        run.config.update(part.config)
        run.history += part.history
        run.stats += part.stats
        run.framework = part.framework if part.framework != "unknown" else run.framework
    return run


def launch_notes(parts: list[Run], paths: list[Path]) -> list[dict[str, object]]:
    """What each launch was: its folder, start, end and exit code (None: it wrote no exit record)."""
    return [
        {
            "folder": path.parent.name,
            "started_at": part.start,
            "ended_at": end_of(part),
            "exit_code": part.exit_code,
        }
        for part, path in zip(parts, paths, strict=True)
    ]
