"""Horovod timelines: their all-reduce phases become the communication time of rank 0's steps.

A runner started with ``--horovod-timeline`` leaves ``horovod-timeline.json`` (Chrome trace format, written
by Horovod's coordinator, rank 0) beside its event files. Each tensor is a trace "process" with nested
``B``/``E`` phases: ``NEGOTIATE_ALLREDUCE`` (waiting until every rank has the tensor ready), then
``ALLREDUCE`` (the exchange itself, with its memory copies and the Gloo/MPI/NCCL call inside). The union
of the ``ALLREDUCE`` phases, in epoch time (the trace records its start as
``start_time_since_epoch_in_micros``), is intersected with each step's window ``[time - t_total, time]``;
the overlap is moved from the step's compute time to its communication time, and the step is marked
``comm_measured``. Steps already measured are left alone, so ingesting twice changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from honestscale.collector._spans import union
from honestscale.errors import HonestscaleError

TIMELINE_NAME = "horovod-timeline.json"
COMM_PHASES = frozenset({"ALLREDUCE"})


class TimelineError(HonestscaleError):
    """A Horovod timeline cannot be read."""


def _events(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    # Horovod writes "[", then events separated by commas, and closes the array only when it stops cleanly
    text = text.rstrip(",")
    if not text.endswith("]"):
        text += "]"
    try:
        events = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TimelineError(
            f"{path}: not a Horovod timeline (JSON error at line {exc.lineno}: {exc.msg})",
            "delete the file or let the run finish writing it, then ingest again",
        ) from None
    except RecursionError:
        raise TimelineError(f"{path}: not a Horovod timeline (JSON nested too deeply to decode)",
                            "delete the file, then ingest again") from None  # fmt: skip
    if not isinstance(events, list):
        raise TimelineError(
            f"{path}: not a Horovod timeline (no JSON array)", "delete the file, ingest again"
        )
    return [e for e in events if isinstance(e, dict)]


def comm_intervals(path: Path) -> list[tuple[float, float]]:
    """The merged all-reduce intervals of a timeline, in epoch seconds."""
    start: float | None = None
    stacks: dict[object, list[tuple[str, float]]] = {}
    spans: list[tuple[float, float]] = []
    for e in _events(path):
        args = e.get("args")
        if e.get("ph") == "M" and isinstance(args, dict) and "start_time_since_epoch_in_micros" in args:
            start = float(str(args["start_time_since_epoch_in_micros"])) / 1e6
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        stack = stacks.setdefault(e.get("pid"), [])
        if e.get("ph") == "B":
            stack.append((str(e.get("name")), float(ts)))
        elif e.get("ph") == "E" and stack:
            name, begun = stack.pop()
            if name in COMM_PHASES:
                spans.append((begun, float(ts)))
    if start is None:
        raise TimelineError(
            f"{path}: no start_time_since_epoch_in_micros record",
            "it was not written by Horovod 0.28's timeline; delete it and ingest again",
        )
    return [(start + begin / 1e6, start + end / 1e6) for begin, end in union(spans)]


def _run_id(folder: Path) -> str | None:
    events = folder / "events-rank0.jsonl"
    try:
        with events.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline())
    except (OSError, json.JSONDecodeError):
        return None
    run_id = first.get("run_id") if isinstance(first, dict) else None
    return run_id if isinstance(run_id, str) else None


def apply(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Move the all-reduce time of ``path`` into rank 0's steps of its run; return how many steps changed."""
    run_id = _run_id(path.parent)
    if run_id is None:
        raise TimelineError(
            f"{path}: no events-rank0.jsonl beside it names the run",
            "keep the timeline in its run's folder, next to rank 0's events",
        )
    spans = comm_intervals(path)
    if not spans:
        return 0
    begins, ends = [b for b, _ in spans], [e for _, e in spans]
    changed = con.execute(
        """
        WITH spans AS (SELECT unnest(?::DOUBLE[]) AS b, unnest(?::DOUBLE[]) AS e),
        comm AS (
            SELECT s.seq, least(coalesce(sum(least(sp.e, s.time) - greatest(sp.b, s.time - s.t_total)), 0),
                                s.t_compute) AS t
            FROM steps s LEFT JOIN spans sp ON sp.b < s.time AND sp.e > s.time - s.t_total
            WHERE s.run_id = ? AND s.rank = 0 AND NOT coalesce(s.comm_measured, false)
            GROUP BY s.seq, s.t_compute
        )
        UPDATE steps SET t_comm = comm.t, t_compute = steps.t_compute - comm.t, comm_measured = true
        FROM comm WHERE steps.run_id = ? AND steps.rank = 0 AND steps.seq = comm.seq
        """,
        [begins, ends, run_id, run_id],
    ).fetchall()
    return int(changed[0][0]) if changed else 0
