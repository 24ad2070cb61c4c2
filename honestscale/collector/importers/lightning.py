"""Lightning's ``CSVLogger``: ``metrics.csv`` (+ ``hparams.yaml`` beside it), written by global rank 0 only.

``metrics.csv`` has one row per logging call group: ``epoch``, ``step`` (the global step) and a column per
metric the module logged (``train_loss_step``, ``val_acc``, ``test_acc``, ...), empty where a row does not hold
it. It holds no time, no world size, no batch size, no accelerator and no other rank's numbers; a metric logged
with ``sync_dist=True`` is the mean over ranks, any other is rank 0's. So the run has evaluations (``val*`` as
validation, ``test*`` as test, at their epoch and step) and nothing timed: every event is placed at the file's
modification time and the run is left without a stop (a stop at that time would say it trained in 0 s); what
the log cannot tell is listed in ``imported.unknown`` with the callback that records it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import Parsed
from honestscale.collector.importers._build import RankEvents, count, run_id

FORMAT = "lightning-metrics"
LABEL = "Lightning CSVLogger metrics.csv"
RECORD = "honestscale.record.lightning.HonestscaleCallback"
_SPLITS = (("val_", "validation"), ("val/", "validation"), ("test_", "test"), ("test/", "test"))


def sniff(path: Path, head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    columns = first.split(",")
    return "step" in columns and "epoch" in columns and len(columns) > 2 and not first.startswith("{")


def _hparams(path: Path) -> dict[str, Any]:
    """``hparams.yaml`` beside the CSV: its scalar values (numbers, strings, booleans)."""
    file = path.with_name("hparams.yaml")
    if not file.is_file():
        return {}
    import yaml

    try:
        got = yaml.safe_load(file.read_text(encoding="utf-8", errors="replace"))
    except yaml.YAMLError:
        return {}
    if not isinstance(got, dict):
        return {}
    return {str(k): v for k, v in got.items() if isinstance(v, int | float | str | bool)}


def _value(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value == value and abs(value) != float("inf") else None


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        out.warnings.append("a header and no rows: no run")
        return out
    when = path.stat().st_mtime
    version = path.parent.name
    name = (
        f"{path.parent.parent.name} {version}" if version.startswith("version_") else (version or "lightning")
    )
    hparams = _hparams(path)
    rank = RankEvents(run_id("lightning", text), 0)
    columns = [c for c in rows[0] if c not in ("epoch", "step")]
    rank.add(
        1, "run_start", when, campaign=campaign, name=name, purpose="final", framework="lightning",
        scope="end_to_end", hyperparameters=hparams or None,
        imported={"tool": "Lightning CSVLogger", "ranks_in_log": "global rank 0 (metrics logged with sync_dist "
                  "are the mean over ranks, the others rank 0's)",
                  "clock": "none: metrics.csv holds no time; every event is placed at the file's modification "
                           "time, and the run is left without a stop (no time to train)",
                  "stop": "metrics.csv does not say how or when the run ended (no time in it)",
                  "columns": columns,
                  "unknown": [f"world_size (not in metrics.csv: record the run with {RECORD})",
                              "step times", "wall clock", "batch size", "accelerator", "the other ranks' numbers"]},
    )  # fmt: skip
    last_train: dict[str, float] = {}
    for line, row in enumerate(rows, start=2):
        epoch, step = count(_value(row.get("epoch"))), count(_value(row.get("step")))
        for key, text_value in row.items():
            value = _value(text_value)
            if key in ("epoch", "step") or key is None or value is None:
                continue
            split = next((s for prefix, s in _SPLITS if key.startswith(prefix)), None)
            if split is None:
                last_train[key] = value
                continue
            metric = next(key.removeprefix(p) for p, s in _SPLITS if key.startswith(p))
            rank.add(line, "eval", when, split=split, metric=metric, value=value, epoch=epoch, step=step)
    if last_train:
        out.notes.append(
            "training metrics kept only as the columns' names (no step times to place them on): "
            + ", ".join(sorted(last_train))
        )
    out.events = rank.numbered()
    return out
