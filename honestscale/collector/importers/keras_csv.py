"""Keras' ``CSVLogger`` (``keras.callbacks.CSVLogger(filename, separator=",", append=False)``; Keras 3 and
``tf_keras``): one row per epoch, ``epoch`` (from 0) and the epoch's logs in the order of their names (``accuracy``,
``learning_rate``, ``loss``, ``val_accuracy``, ``val_loss``), ``NA`` where an epoch lacks one.

The file holds no clock and no step count: the run and every event are placed at the file's modification time
(its last write: the last epoch's end), no step event is made (the optimizer steps are unknown, and said so), the
``val_*`` columns are the validation evaluations at their epoch (the last row's the final quality), the rest are
training metrics kept by name. The world size is not written (``imported.unknown`` says so). With ``append=True``
a second training goes on into the same file: an epoch that is not past the one before is said in a warning.
Impossible values (NaN, inf, a word, an accuracy outside [0, 1]) go to the quarantine by line and field; a row with
more or fewer fields than the header goes there whole.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers import lightning
from honestscale.collector.importers._build import RankEvents, checked, count, ragged, raw_row, run_id

FORMAT = "keras-csvlogger"
LABEL = "Keras CSVLogger file"
_SEPARATORS = ",;\t|"
_UNKNOWN = [
    "world_size (Keras' CSVLogger does not write how many processes or replicas trained)",
    "the optimizer steps (one row per epoch, no step count): no step event",
    "every time (the file holds no clock: each event is placed at the file's modification time)",
    "samples per step",
    "the Keras backend (taken as TensorFlow)",
    "accelerator",
    "how the run ended",
]


def _separator(head: bytes) -> str | None:
    first = head.split(b"\n", 1)[0].strip().decode("utf-8", "replace").removeprefix("\ufeff")
    if not first.startswith("epoch") or len(first) < 7 or first[5] not in _SEPARATORS:
        return None
    columns = first.split(first[5])
    return first[5] if len(columns) > 1 and "step" not in columns and all(columns) else None


def sniff(path: Path, head: bytes) -> bool:
    """A header that begins with ``epoch`` and a separator, with no ``step`` column (Lightning's CSVLogger has)."""
    return _separator(head) is not None


def _rows(out: Parsed, text: str, separator: str) -> tuple[list[lightning.Row], set[str], list[int]]:
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=separator)
    rows: list[lightning.Row] = []
    trained: set[str] = set()
    back: list[int] = []
    for row in reader:
        line = reader.line_num
        if (bad := ragged(row, reader.fieldnames, line)) is not None:
            out.bad.append(bad)
            continue
        raw = raw_row(row)
        value = checked(out, line, raw, "epoch", row.get("epoch"), least=0.0, what="epoch")
        epoch = count(value)
        if value is not None and epoch is None:
            out.bad.append(
                BadLine(line, raw, f"field 'epoch': {value!r} is no whole number: the epoch is left out")
            )
        got = lightning.Row(line, epoch, None)
        for key, text_value in row.items():
            if key != "epoch" and text_value and text_value != "NA":  # Keras writes NA for a value not logged
                lightning.cell(out, line, raw, key, text_value, got, trained)
        last = next((r.epoch for r in reversed(rows) if r.epoch is not None), None)
        if epoch is not None and last is not None and epoch <= last:
            back.append(line)
        rows.append(got)
    return rows, trained, back


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    text = text.removeprefix("\ufeff")
    separator = _separator(text[:4096].encode())
    assert separator is not None  # sniffed
    rows, trained, back = _rows(out, text, separator)
    if not rows:
        out.warnings.append("no row could be read: no run" if out.bad else "a header and no rows: no run")
        return out
    if back:
        out.warnings.append(
            f"{len(back)} rows at an epoch not past the one before (a second training appended with append=True?): "
            f"lines {', '.join(map(str, back[:10]))}; read as one run"
        )
    end = path.stat().st_mtime
    rank = RankEvents(run_id("keras-csvlogger", text), 0)
    rank.add(
        1,
        "run_start",
        end,
        campaign=campaign,
        name=path.stem,
        purpose="final",
        framework="tensorflow",
        scope="end_to_end",
        imported={
            "tool": "Keras CSVLogger",
            "ranks_in_log": "the process that ran model.fit (the chief's, under a distribution strategy)",
            "training_metrics": sorted(trained),
            "clock": "none: every event at the file's modification time (its last write)",
            "unknown": _UNKNOWN,
            "stop": "the file does not say how or when the run ended",
        },
    )
    for row in rows:
        for split, metric, value in row.evals:
            rank.add(row.line, "eval", end, split=split, metric=metric, value=value, epoch=row.epoch)
    evaluations = sum(bool(r.evals) for r in rows)
    out.notes.append(
        f"{len(rows)} epochs, {evaluations} with a validation; training metrics kept by name: "
        + (", ".join(sorted(trained)) or "none")
    )
    out.events = rank.numbered()
    return out
