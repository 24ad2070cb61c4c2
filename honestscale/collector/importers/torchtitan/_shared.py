"""What torchtitan's three readers share: the per-rank JSONL files' lines and dump folder, the start and stop of a
run read from one of them, and the throughput torchtitan claims (its tokens/s, TFLOP/s and MFU)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import harmonic_mean
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import RankEvents

_LOG_FOLDERS = ("experiment_logs", "system_logs", "structured_logs")


def head_lines(head: bytes, n: int = 3) -> list[dict[str, object]]:
    """The JSON objects among the first ``n`` lines of a file's head (a line that is no JSON object skipped)."""
    out = []
    for raw in head.split(b"\n")[:n]:
        try:
            got = json.loads(raw)
        except ValueError:
            continue
        if isinstance(got, dict):
            out.append(got)
    return out


def dump_folder(path: Path) -> Path:
    """The dump folder a per-rank JSONL file belongs to (its logs' folder's parent)."""
    return path.parent.parent if path.parent.name in _LOG_FOLDERS else path.parent


def jsonl(text: str, out: Parsed) -> list[tuple[int, dict[str, object]]]:
    """A JSONL file's objects with their line numbers; a line that is no JSON object is quarantined."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            got = json.loads(line)
        except ValueError as exc:
            out.bad.append(BadLine(n, line, f"not JSON ({exc}): a torchtitan log line cut short?"))
            continue
        if not isinstance(got, dict):
            out.bad.append(BadLine(n, line, "not a JSON object"))
            continue
        rows.append((n, got))
    return rows


def start_run(
    rank: RankEvents,
    line: int,
    t: float,
    path: Path,
    ranks_file: int | None,
    campaign: str | None,
    kind: str,
    host: Any,
    unknown: list[str],
    claims: dict[str, object] | None = None,
) -> None:
    """The ``run_start`` of a per-rank JSONL file's run: its dump folder's, of a world size it cannot tell."""
    folder = dump_folder(path)
    world = f"world_size (at least {(ranks_file or 0) + 1}: this file's rank + 1)"
    imported = {
        "tool": "torchtitan",
        "file": path.name,
        "layout": kind,
        "accelerated": True,
        "ranks_in_log": "every rank (one file each): ingest them all",
        "dump_folder": folder.name,
        "unknown": [world, *unknown],
    }
    rank.add(
        line,
        "run_start",
        t,
        campaign=campaign,
        name=folder.name,
        purpose="final",
        framework="torchtitan",
        host=str(host) if host else None,
        scope="end_to_end",
        claims=claims or None,
        imported=imported,
    )


def stop_if_torn_down(rank: RankEvents, ended: bool, line: int, t: float) -> None:
    """torchtitan records the process group's teardown only after the last step: its run ended; without it the
    log stops mid-run (killed, or still running) and the run is left without a stop (incomplete)."""
    if ended:
        rank.add(line, "run_stop", t, status="success")


def _mid(values: list[float | None]) -> float | None:
    """The harmonic mean of the values printed, the first left out (when there is another); None when one is not
    above 0 or none was printed."""
    got = [v for v in values if v is not None]
    got = got[1:] or got
    return harmonic_mean(got) if got and min(got) > 0 else None


def claims(
    tps: list[float | None], tflops: list[float | None], mfu_pct: list[float | None], peak: float | None
) -> dict[str, object]:
    """torchtitan's per-device tokens/s, TFLOP/s and MFU over its steps after the first (which holds compilation
    and allocation): the harmonic mean of the per-step values it printed, a rate over the same tokens and time as
    the run's own (equal tokens per step)."""
    out: dict[str, object] = {
        "tokens_per_s_per_accelerator": _mid(tps),
        "tflops_per_accelerator": _mid(tflops),
    }
    m = _mid(mfu_pct)
    out["mfu"] = m / 100.0 if m is not None else None
    out["peak_tflops"] = peak / 1e12 if peak else None
    out = {k: v for k, v in out.items() if v is not None}
    if out:
        out["flops_convention"] = "palm (torchtitan: 6 (N - embedding) + 12 L H Q T)"
        out["from"] = "harmonic mean of the per-step values it printed, the first step left out"
    return out
