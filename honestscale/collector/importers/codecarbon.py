"""CodeCarbon's ``emissions.csv``: one row per tracker stop (``timestamp`` = the stop, ``duration`` seconds,
``energy_consumed`` = cpu + gpu + ram energy in kWh, ``tracking_mode`` machine|process).

Energy records, never runs: a row says how much energy one tracker counted between its start and stop. It
names no host and no Slurm job, so it is joined to a run by time window alone (analysis/energy.py), and its
timestamp has no time zone (CodeCarbon writes the local time): it is read in this machine's zone, which the
record says. The energy is an **estimate** in part whatever the machine: the RAM's power is always CodeCarbon's
model (W per GB), and the CPU's comes from RAPL where CodeCarbon could read it, else from a TDP table or a
constant per thread, and the CSV does not say which; a row whose energy is 0 has none (not measured).
"""

from __future__ import annotations

import csv
import io
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import Parsed

FORMAT = "codecarbon"
LABEL = "CodeCarbon emissions.csv"
KWH = 3.6e6  # joules
_NEEDED = ("timestamp", "duration", "energy_consumed")
METHOD = (
    "estimated by CodeCarbon {version} ({mode} mode): RAM from its model of W per GB, CPU from RAPL where it could "
    "read it, else from a TDP table (the CSV does not say which), GPU from NVML"
)


def sniff(path: Path, head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return all(c in first.split(",") for c in (*_NEEDED, "emissions", "project_name"))


def _float(row: dict[str, Any], key: str) -> float | None:
    try:
        value = float(row.get(key) or "")
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    zone = time.strftime("%Z") or "local"
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        stamp, duration, kwh = (
            row.get("timestamp") or "",
            _float(row, "duration"),
            _float(row, "energy_consumed"),
        )
        try:
            stop = datetime.fromisoformat(stamp).timestamp()  # naive: this machine's zone
        except ValueError:
            out.warnings.append(f"line {line}: timestamp {stamp!r} is no ISO time: the row is left out")
            continue
        if duration is None or duration < 0:
            out.warnings.append(
                f"line {line}: duration {row.get('duration')!r} is no time: the row is left out"
            )
            continue
        measured = kwh is not None and kwh > 0
        details = {k: row.get(k) for k in ("project_name", "run_id", "experiment_id", "cpu_model", "cpu_count",
                                           "gpu_model", "gpu_count", "tracking_mode", "codecarbon_version",
                                           "country_iso_code", "pue") if row.get(k)}  # fmt: skip
        for part in ("cpu_energy", "gpu_energy", "ram_energy"):
            if (v := _float(row, part)) is not None:
                details[part.replace("energy", "j")] = v * KWH
        details["timestamp"] = (
            f"{stamp} read in this machine's time zone ({zone}); CodeCarbon writes local time"
        )
        method = METHOD.format(
            version=row.get("codecarbon_version") or "?", mode=row.get("tracking_mode") or "?"
        )
        out.energy.append(
            {
                "line": line,
                "format": FORMAT,
                "job_id": None,
                "step_id": None,
                "host": None,
                "nodes": None,
                "started_at": stop - duration,
                "stopped_at": stop,
                "energy_j": kwh * KWH if measured and kwh else None,
                "method": method if measured else "not measured (energy_consumed is 0 or missing)",
                "state": None,
                "details": details,
            }
        )
    if not out.energy and not out.warnings:
        out.warnings.append("a header and no rows: no energy record")
    return out
