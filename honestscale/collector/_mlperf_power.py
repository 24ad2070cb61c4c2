"""Energy to train from MLPerf Training Power logs (``power/<result stem>/node_*.txt``, ``sw_*.txt``).

Each node file holds the node's AC wall power as ``power_reading`` lines (watts, every few seconds)
from before ``run_start`` to after ``run_stop``; a switch file holds one ``interconnect_power_est``
(watts, a constant estimate). The run's energy is each node's power integrated over the run window
(``run_start`` .. ``run_stop`` of the result log), summed over the nodes, plus every switch's estimate
times the time to train; a ``conversion_eff`` line scales its file's power, as in mlperf-logging.

A reading covers the time since the reading before it (mlperf-logging's convention: value x (t - t
before)); the first reading inside the window covers back to ``run_start``, the first one after it up
to ``run_stop``. The official summarizer instead scales the mean power over the measurement window
(``power_measurement_start`` .. ``_stop``) to the time to train, and divides by zero on logs whose stop
line repeats the start's time (the v4.0 smc-ac-power logs); integrating over the run window needs
neither marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARK = ":::MLLOG"


@dataclass
class Energy:
    joules: float | None = None
    nodes: int = 0
    switches: int = 0
    warnings: list[str] = field(default_factory=list)


def _records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    recs: list[dict[str, Any]] = []
    bad: list[str] = []
    try:
        text = path.read_text(encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        return [], [f"power log {path} unreadable ({exc.strerror})"]
    for number, line in enumerate(text.split("\n"), start=1):
        at = line.find(MARK)
        if at < 0:
            continue
        try:
            rec = json.loads(line[at + len(MARK) :])
        except json.JSONDecodeError as exc:
            bad.append(f"{path.name} line {number}: not valid JSON ({exc.msg})")
            continue
        except RecursionError:
            bad.append(f"{path.name} line {number}: JSON nested too deeply to decode")
            continue
        if isinstance(rec, dict) and isinstance(rec.get("time_ms"), int | float):
            recs.append(rec)
    return recs, bad


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _efficiency(recs: list[dict[str, Any]]) -> float:
    """The file's ``conversion_eff`` (power measured before a conversion stage), 1 when it has none."""
    return next((_number(r.get("value")) for r in recs if r.get("key") == "conversion_eff"), None) or 1.0


def _node_joules(
    recs: list[dict[str, Any]], start_ms: float, stop_ms: float
) -> tuple[float | None, str | None]:
    eff = _efficiency(recs)
    readings = sorted(
        (float(r["time_ms"]), v)
        for r in recs
        if r.get("key") == "power_reading" and (v := _number(r.get("value"))) is not None
    )
    if not readings:
        return None, "no power_reading line"
    if readings[0][0] > start_ms or readings[-1][0] < stop_ms:
        first, last = readings[0][0], readings[-1][0]
        return None, (
            f"readings from {(first - start_ms) / 1000:+.1f} s to {(last - stop_ms) / 1000:+.1f} s around the run "
            "do not cover it (they must begin before run_start and end after run_stop)"
        )
    joules = 0.0
    before = readings[0][0]
    for t, watts in readings:
        lo, hi = max(before, start_ms), min(t, stop_ms)
        if hi > lo:
            joules += watts * (hi - lo) / 1000.0
        before = t
        if t >= stop_ms:
            break
    return eff * joules, None


def energy(folder: Path, start_ms: float, stop_ms: float) -> Energy:
    """Energy in joules of the run between ``start_ms`` and ``stop_ms`` from the power logs in ``folder``."""
    out = Energy()
    nodes = sorted(folder.glob("node_*.txt"))
    switches = sorted(folder.glob("sw_*.txt"))
    if not nodes:
        out.warnings.append(f"power folder {folder} has no node_*.txt: energy unknown")
        return out
    total = 0.0
    for path in nodes:
        recs, bad = _records(path)
        out.warnings.extend(bad)
        joules, why = _node_joules(recs, start_ms, stop_ms)
        if joules is None:
            out.warnings.append(f"power log {path}: {why}: energy unknown")
            return out
        total += joules
    seconds = (stop_ms - start_ms) / 1000.0
    for path in switches:
        recs, bad = _records(path)
        out.warnings.extend(bad)
        eff = _efficiency(recs)
        watts = next(
            (_number(r.get("value")) for r in recs if r.get("key") == "interconnect_power_est"), None
        )
        if watts is None:
            out.warnings.append(f"power log {path}: no interconnect_power_est: energy unknown")
            return out
        total += eff * watts * seconds
    out.joules, out.nodes, out.switches = total, len(nodes), len(switches)
    return out
