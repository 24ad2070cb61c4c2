"""DLLogger logs written by every rank of one training: which rank a log is, and which logs are one training.

A DeepLearningExamples script that logs on every rank writes a JSON stream per rank, each with the same PARAMETER
row but its ``local_rank`` (or ``rank``). Those logs are one training: the same parameters, the rank's key aside,
in one folder, started together (their PARAMETER rows within ``TOGETHER_S`` of each other, chained: ranks start
within seconds, a repetition with the same parameters after the training before it ended). Their run id is made of
the parameters and the earliest start of the group, so every rank's log gives the same id without reading the
others whole; a log without a rank key keeps its own id (one log, one run).
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

# the PARAMETER keys that name the rank, the global one first (local_rank repeats on every node)
RANK_KEYS = ("rank", "global_rank", "local_rank")
TOGETHER_S = 60.0  # ranks of one training start within this of each other (chained)
_HEAD = 1 << 16  # a log's PARAMETER row is among its first lines


def rank_of(params: Mapping[str, object]) -> tuple[str, int] | None:
    """The key that names this log's rank and its value, where the parameters hold a whole number for one."""
    for key in RANK_KEYS:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return key, value
    return None


def shared(params: Mapping[str, object]) -> str:
    """The parameters every rank of the training logs alike (the rank's keys aside), as text to compare."""
    return json.dumps({k: v for k, v in params.items() if k not in RANK_KEYS}, sort_keys=True, default=str)


def _parameters(path: Path) -> tuple[str, float] | None:
    """A DLLogger log's shared parameters and the time of its first PARAMETER row, from its head; None for another
    file, or a log without a rank key or a readable timestamp."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD).decode("utf-8", "replace")
    except OSError:
        return None
    params: dict[str, object] = {}
    began: float | None = None
    for line in head.splitlines():
        if not line.startswith("DLLL {"):
            continue
        try:
            rec = json.loads(line[5:])
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("step") == "PARAMETER" and isinstance(rec.get("data"), dict):
            params.update(rec["data"])
            if began is None:
                try:
                    began = float(str(rec.get("timestamp")))
                except ValueError:
                    return None
    if began is None or not math.isfinite(began) or rank_of(params) is None:
        return None
    return shared(params), began


@functools.lru_cache(maxsize=256)
def _folder(folder: str, _mtime_ns: int) -> tuple[tuple[str, float], ...]:
    """Every per-rank DLLogger log's shared parameters and start in ``folder`` (read again when it changes)."""
    got = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and (found := _parameters(Path(entry.path))) is not None:
                got.append(found)
    return tuple(sorted(got))


def training_start(path: Path, mine: str, began: float) -> float:
    """The start of the training this log is a rank of: the earliest start of the logs in its folder with the same
    shared parameters whose starts chain to this one's within ``TOGETHER_S``."""
    folder = path.parent
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        return began
    starts = sorted({t for params, t in _folder(str(folder), stamp) if params == mine} | {began})
    i = starts.index(began)
    while i > 0 and starts[i] - starts[i - 1] <= TOGETHER_S:
        i -= 1
    return starts[i]
