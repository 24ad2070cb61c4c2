"""A TensorBoard event file read with the ``tensorboard`` package's own code (an optional extra: ``pip install
'honestscale[tensorboard]'``): its record loader, its ``Event`` protobuf class, and its read-time compatibility layer
(``data_compat``), which turns the legacy summaries into the tensor scalars ``tf.summary`` writes (a record of
``simple_value`` scalars alone, what PyTorch's ``SummaryWriter`` writes, is taken as it is: the same values, a
quarter of the time). Nothing here parses TFRecord framing or protobuf by hand.

The loader stops at the first record it cannot read (a record cut short while the writer is still writing, or a
damaged one) without saying so; the records it read are counted here, and the bytes after the last of them are
said by the caller (never lost in silence).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, NeedsLibrary, Parsed
from honestscale.collector.importers._scalars import Scalar

_HPARAMS_START = "_hparams_/session_start_info"
_FRAMING = 16  # each TFRecord: an 8-byte length, its 4-byte CRC, the payload, the payload's 4-byte CRC


@dataclass
class Log:
    """What an event file holds that a training's events are made of."""

    created: float | None = None  # the file_version record's wall time: when the writer opened the file
    scalars: list[Scalar] = field(default_factory=list)
    # add_text's tags, the last value of each (PyTorch's SummaryWriter writes add_text("args", ...) as the tag
    # "args/text_summary": the suffix is dropped)
    texts: dict[str, str] = field(default_factory=dict)
    hparams: dict[str, Any] = field(default_factory=dict)  # the hparams plugin's session start (add_hparams)
    records: int = 0
    read_bytes: int = 0  # the bytes of the records read, framing included
    size: int = 0  # the file's size when it was read
    unreadable: list[tuple[int, str]] = field(default_factory=list)  # (record, why): no Event in it


def _modules() -> Any:
    try:
        from tensorboard import data_compat
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
        from tensorboard.compat.proto import event_pb2
        from tensorboard.plugins.hparams import metadata
        from tensorboard.util import tensor_util
    except ImportError as exc:
        raise NeedsLibrary("tensorboard", "tensorboard", str(exc)) from exc
    return data_compat, RawEventFileLoader, event_pb2, metadata, tensor_util


def _hparam(value: Any) -> Any:
    """A google.protobuf Value of the hparams plugin as a number, a string or a bool."""
    kind = value.WhichOneof("kind")
    return getattr(value, kind) if kind in ("number_value", "string_value", "bool_value") else None


def load(path: Path) -> Log:
    """Every record of the file the loader can read, in the file's order."""
    data_compat, raw_loader, event_pb2, metadata, tensor_util = _modules()
    log = Log(size=path.stat().st_size)
    tags: dict[str, str] = {}  # each tag's one string, not a copy per value
    for number, record in enumerate(raw_loader(str(path)).Load(), start=1):
        log.records, log.read_bytes = number, log.read_bytes + len(record) + _FRAMING
        try:
            event = event_pb2.Event.FromString(record)
        except Exception as exc:  # a payload whose CRC held and that is no Event (protobuf's DecodeError)
            log.unreadable.append((number, f"{type(exc).__name__}: {exc}"))
            continue
        what = event.WhichOneof("what")
        if what == "file_version":
            log.created = event.wall_time if log.created is None else log.created
        if what != "summary":
            continue
        if all(
            v.WhichOneof("value") == "simple_value" for v in event.summary.value
        ):  # SummaryWriter's scalars
            log.scalars.extend(
                Scalar(number, event.wall_time, event.step, tags.setdefault(v.tag, v.tag), v.simple_value)
                for v in event.summary.value
            )
            continue
        for value in data_compat.migrate_event(event).summary.value:
            plugin = value.metadata.plugin_data.plugin_name
            if plugin == "scalars" and value.HasField("tensor"):
                got = tensor_util.make_ndarray(value.tensor)
                log.scalars.append(Scalar(number, event.wall_time, event.step, value.tag, float(got.item())))
            elif plugin == "text" and value.HasField("tensor"):
                got = tensor_util.make_ndarray(value.tensor).reshape(-1)
                log.texts[value.tag.removesuffix("/text_summary")] = b"\n".join(
                    t if isinstance(t, bytes) else str(t).encode() for t in got
                ).decode("utf-8", "replace")
            elif plugin == "hparams" and value.tag == _HPARAMS_START:
                start = metadata.parse_session_start_info_plugin_data(value.metadata.plugin_data.content)
                log.hparams.update(
                    {k: _hparam(v) for k, v in start.hparams.items() if _hparam(v) is not None}
                )
    return log


def events_in(folder: Path) -> list[Path]:
    """A folder's event files, in the order of their names (each begins with its time)."""
    return sorted(p for p in folder.glob("events.out.tfevents.*") if p.is_file())


def append(
    out: Parsed, log: Log, file: Path, name: Callable[[str], str] = lambda tag: tag
) -> tuple[int, dict[str, str]]:
    """Another event file's records onto ``log``, numbered on, each tag as ``name`` says; where its records start
    (the number before its first) and its tags as named."""
    more = load(file)
    said(out, file, more)
    base = log.records
    tags = {s.tag: name(s.tag) for s in more.scalars}
    log.scalars += [replace(s, record=s.record + base, tag=tags[s.tag]) for s in more.scalars]
    log.texts.update(more.texts)
    log.hparams.update(more.hparams)
    log.records += more.records
    return base, tags


def said(out: Parsed, path: Path, log: Log) -> None:
    for record, why in log.unreadable:
        out.bad.append(BadLine(record, f"record {record}", f"no TensorBoard event in it ({why}): left out"))
    if log.read_bytes < log.size:
        out.warnings.append(
            f"{path.name}: the records end at byte {log.read_bytes:,} of {log.size:,}: the rest ({log.size - log.read_bytes:,} "
            "bytes) is a record cut short (a writer still writing, or a copy cut off) or damaged, and was not read"
        )


def read_folder(out: Parsed, files: list[Path]) -> Log:
    """The event files of one folder as one log, in the order of their names (each name begins with its time): a
    writer opened again in the same process (the Trainer's evaluation after training) writes a second file. Records
    are numbered on across the files, and a note says which numbers are whose."""
    log = load(files[0])
    said(out, files[0], log)
    spans = [f"{files[0].name}: 1-{log.records}"]
    for file in files[1:]:
        base, _ = append(out, log, file)
        spans.append(f"{file.name}: {base + 1}-{log.records}")
    if len(files) > 1:
        out.notes.append(
            f"{len(files)} event files of one folder read as one run, records numbered on: {'; '.join(spans)}"
        )
    return log
