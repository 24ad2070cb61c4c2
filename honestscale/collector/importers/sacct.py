"""Slurm accounting: ``sacct -P --noconvert`` output (``|``-separated, a header line) with at least ``JobID``,
``Start``, ``End`` and ``ConsumedEnergyRaw`` (also read: ``ElapsedRaw``, ``NNodes``, ``NodeList``, ``AllocTRES``,
``State``, ``ExitCode``, ``JobName``).

Energy records, never runs: each line (a job's allocation ``123``, an array task ``123_4``, a step ``123.0`` or
``123.batch``) says what Slurm's energy plugin counted for it over every node of the allocation, joules. It is
joined to a run by the run's ``slurm_job_id`` (and ``slurm_step_id`` where the run was one step of the job). A
``ConsumedEnergyRaw`` of 0 or empty is **not measured** (no energy plugin, or one that cannot read the node:
``AcctGatherEnergyType``), never 0 J. Times are Slurm's local time without a zone, read in this machine's zone.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from honestscale.collector._parsed import BadLine, Parsed

FORMAT = "slurm-sacct"
LABEL = "Slurm accounting (sacct -P)"
_NEEDED = ("JobID", "Start", "End", "ConsumedEnergyRaw")


def sniff(path: Path, head: bytes) -> bool:
    columns = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().split("|")
    return all(c in columns for c in _NEEDED)


_NO_TIME = ("Unknown", "None", "")  # sacct's words for a job still running or never started


def _time(out: Parsed, line: int, raw: str, field: str, text: str) -> float | None:
    """An ISO time sacct printed (naive: this machine's zone); None for its Unknown/None, and for anything else,
    which is quarantined by field."""
    if text in _NO_TIME:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        out.bad.append(
            BadLine(
                line,
                raw,
                f"field {field!r}: {text!r} is no time (sacct prints an ISO time, Unknown "
                "or None): the line is left out",
            )
        )
        return None


def _nodes(out: Parsed, line: int, raw: str, text: str | None) -> int | None:
    if not text or text.isdigit():
        return int(text) if text else None
    out.bad.append(BadLine(line, raw, f"field 'NNodes': {text!r} is no count of nodes: the line is left out"))
    return None


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    lines = text.splitlines()
    header = lines[0].split("|")
    zone = time.strftime("%Z") or "local"
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        values = raw.split("|")
        if len(values) != len(header):
            out.warnings.append(
                f"line {number}: {len(values)} fields where the header has {len(header)} (a '|' inside a job "
                "name? sacct -P does not quote): the line is left out"
            )
            continue
        row = dict(zip(header, values, strict=True))
        job, _, step = row["JobID"].partition(".")
        energy = row.get("ConsumedEnergyRaw", "")
        joules = int(energy) if energy.isdigit() and int(energy) > 0 else None
        before = len(out.bad)
        start, end = (
            _time(out, number, raw, "Start", row["Start"]),
            _time(out, number, raw, "End", row["End"]),
        )
        nodes = _nodes(out, number, raw, row.get("NNodes"))
        if len(out.bad) > before:
            continue
        details = {
            k: row[k] for k in ("JobName", "User", "AllocTRES", "ExitCode", "ElapsedRaw") if row.get(k)
        }
        details["times"] = f"Start and End read in this machine's time zone ({zone}); sacct prints local time"
        out.energy.append(
            {
                "line": number,
                "format": FORMAT,
                "job_id": job,
                "step_id": step or None,
                "host": row.get("NodeList") or None,
                "nodes": nodes,
                "started_at": start,
                "stopped_at": end,
                "energy_j": float(joules) if joules else None,
                "method": "measured by Slurm's energy plugin (ConsumedEnergyRaw, every node of the allocation)"
                if joules
                else f"not measured (ConsumedEnergyRaw {energy or 'empty'}: no energy plugin, or one that "
                "cannot read the nodes)",
                "state": row.get("State") or None,
                "details": details,
            }
        )
    if not out.energy and not out.warnings and not out.bad:
        out.warnings.append("a header and no job lines: no energy record")
    return out
