"""CodeCarbon's ``emissions.csv``: one row per tracker stop (``timestamp`` = the stop, ``duration`` seconds,
``energy_consumed`` = cpu + gpu + ram energy in kWh, ``tracking_mode`` machine|process).

Energy records, never runs: a row says how much energy one tracker counted between its start and stop. It
names no host and no Slurm job, so it is joined to a run by time window alone (analysis/energy.py), and its
timestamp has no time zone (CodeCarbon writes the local time): it is read in this machine's zone, which the
record says. The energy is an **estimate** in part whatever the machine: the RAM's power is always CodeCarbon's
model, and the CPU's comes from RAPL where CodeCarbon could read it, else from a TDP table or a constant per
thread scaled by load, and the CSV does not say which. The record's method says what its row says: the version,
the tracking mode (machine: the whole machine; process: the process's share), each part's power and which is
modelled, and the modelled RAM's share of the energy. A row whose energy is 0 has none (not measured); a negative,
non-finite or overflowing value (1e308 kWh) is quarantined by line and field, and a row with more or fewer
fields than the header by line: never a record.
"""

from __future__ import annotations

import csv
import io
import time
from datetime import datetime
from pathlib import Path

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import checked, ragged
from honestscale.collector.importers._build import raw_row as _raw

FORMAT = "codecarbon"
LABEL = "CodeCarbon emissions.csv"
KWH = 3.6e6  # joules
_NEEDED = ("timestamp", "duration", "energy_consumed")
_PARTS = ("cpu_energy", "ram_energy", "gpu_energy")
MODES = {
    "machine": "machine mode: the whole machine's power, every process on it",
    "process": "process mode: the tracked process's share of the machine's power, by its CPU and RAM use",
}


def sniff(path: Path, head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return all(c in first.split(",") for c in (*_NEEDED, "emissions", "project_name"))


def _method(row: dict[str, str], cpu_j: float | None, ram_j: float | None, gpu_j: float | None) -> str:
    """How CodeCarbon came by this row's energy, from what the row itself says: its version and tracking mode, each
    part's power, and which parts are its model. The RAM's power is always its model; the CPU's is RAPL where it
    could read it, else a TDP table or a constant per thread scaled by load, and the row does not say which; the
    GPU's is NVML's."""
    mode = row.get("tracking_mode") or "?"
    total = sum(v for v in (cpu_j, ram_j, gpu_j) if v)
    parts = [
        f"CPU {_watts(row, 'cpu_power')} (RAPL if CodeCarbon could read it, else its model: the row does not "
        "say which)",
        f"RAM {_watts(row, 'ram_power')} (CodeCarbon's model, never measured"
        + (f"; {ram_j / total:.0%} of the energy)" if ram_j and total else ")"),
    ]
    parts.append(f"GPU {_watts(row, 'gpu_power')} (NVML)" if gpu_j else "no GPU counted")
    return (
        f"estimated by CodeCarbon {row.get('codecarbon_version') or '?'}, "
        f"{MODES.get(mode, f'tracking mode {mode!r}')}: " + "; ".join(parts)
    )


def _watts(row: dict[str, str], key: str) -> str:
    try:
        return f"{float(row.get(key) or ''):,.1f} W"
    except ValueError:
        return "? W"


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    zone = time.strftime("%Z") or "local"
    reader = csv.DictReader(io.StringIO(text, newline=""))  # a lone CR ends a row, never raises
    for row in reader:
        line = reader.line_num  # a quoted field may span lines: the row's last line
        if (bad := ragged(row, reader.fieldnames, line)) is not None:
            out.bad.append(bad)
            continue
        _row(out, row, line, zone)
    if not out.energy and not out.warnings and not out.bad:
        out.warnings.append("a header and no rows: no energy record")
    return out


def _row(out: Parsed, row: dict[str, str], line: int, zone: str) -> None:
    """One tracker's stop as an energy record; an impossible value quarantined by field, never a record of it."""
    raw, before = _raw(row), len(out.bad)
    stamp = row.get("timestamp") or ""
    try:
        stop = datetime.fromisoformat(stamp).timestamp()  # naive: this machine's zone
    except ValueError:
        out.bad.append(
            BadLine(line, raw, f"field 'timestamp': {stamp!r} is no ISO time: the row is left out")
        )
        return
    duration = checked(out, line, raw, "duration", row.get("duration"), least=0.0, what="duration")
    kwh = checked(out, line, raw, "energy_consumed", row.get("energy_consumed"), least=0.0, what="energy")
    parts = {p: checked(out, line, raw, p, row.get(p), least=0.0, what="energy") for p in _PARTS}
    joules = (
        checked(out, line, raw, "energy_consumed", kwh * KWH, least=0.0, what="energy in joules")
        if kwh
        else kwh
    )
    # each part's joules finite too (1e308 kWh of CPU is no energy): else quarantined, the row left out
    part_j = {
        p: checked(out, line, raw, p, v * KWH, least=0.0, what="energy in joules")
        for p, v in parts.items()
        if v is not None
    }
    if duration is None or len(out.bad) > before:
        return
    details: dict[str, str | float | None] = {
        k: row.get(k)
        for k in (
            "project_name",
            "run_id",
            "experiment_id",
            "cpu_model",
            "cpu_count",
            "gpu_model",
            "gpu_count",
            "tracking_mode",
            "codecarbon_version",
            "country_iso_code",
            "pue",
            "cpu_power",
            "ram_power",
            "gpu_power",
        )
        if row.get(k)
    }
    details |= {p.replace("energy", "j"): j for p, j in part_j.items()}
    details["timestamp"] = f"{stamp} read in this machine's time zone ({zone}); CodeCarbon writes local time"
    cpu, ram, gpu = (parts[p] for p in _PARTS)
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
            "energy_j": joules or None,
            "method": _method(row, cpu, ram, gpu)
            if joules
            else "not measured (energy_consumed is 0 or missing)",
            "state": None,
            "details": details,
        }
    )
