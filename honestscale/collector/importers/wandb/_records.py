"""The records of a Weights & Biases offline run file (``run-<id>.wandb``), parsed with wandb's own protobuf
class (``wandb.proto.wandb_internal_pb2.Record``; an optional extra: ``pip install 'honestscale[wandb]'``).

wandb 0.31 ships no reader of these files (its Python ``DataStore`` went with the move to ``wandb-core``), so the
file's framing is read here, and only the framing: a 7-byte header (``:W&B``, the magic 0xBEE1, version 0), then
32 KiB blocks of chunks, each a CRC-32 (of the chunk's type byte, then its data), a 16-bit length and a type (1 a
whole record, 2/3/4 its first, middle and last parts), the rest of a block too short for a chunk header left zero.
Every record's bytes are handed to wandb's ``Record``; nothing of a record is parsed here.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from honestscale.collector._parsed import NeedsLibrary

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_BLOCK = 32768
_CHUNK = struct.Struct("<IHB")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


@dataclass
class Framing:
    """What the framing left unread: chunks whose CRC failed or out of order, and the bytes after the last whole
    record (a run still writing, or a copy cut off)."""

    bad: list[tuple[int, str]] = field(default_factory=list)  # (byte offset, why)
    read_bytes: int = len(HEADER)


def record_class() -> Any:
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError as exc:
        raise NeedsLibrary("wandb", "wandb", str(exc)) from exc
    return wandb_internal_pb2.Record  # type: ignore[attr-defined]  # generated at import; wandb ships no stub of it


def _crc(kind: int, data: bytes) -> int:
    return zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF


def records(data: bytes, framing: Framing) -> Iterator[tuple[int, Any]]:
    """(record number from 1, wandb's Record) for every whole record; what could not be read goes to ``framing``."""
    record = record_class()
    pos, number, parts, started = len(HEADER), 0, b"", 0
    while pos + _CHUNK.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK.size:
            pos += left
            continue
        crc, length, kind = _CHUNK.unpack_from(data, pos)
        if kind == 0 and length == 0 and crc == 0:  # zeros: the writer stopped here
            break
        chunk = data[pos + _CHUNK.size : pos + _CHUNK.size + length]
        if len(chunk) < length or _crc(kind, chunk) != crc:
            framing.bad.append(
                (pos, "a chunk cut short" if len(chunk) < length else "a chunk whose CRC fails")
            )
            break
        at, pos = pos, pos + _CHUNK.size + length
        if kind in (_FULL, _FIRST):
            parts, started = chunk, at
        elif kind in (_MIDDLE, _LAST) and parts:
            parts += chunk
        else:
            framing.bad.append((at, f"a chunk of type {kind} out of order"))
            parts = b""
            continue
        if kind in (_FULL, _LAST):
            number += 1
            try:
                yield number, record.FromString(parts)
            except Exception as exc:  # protobuf's DecodeError: bytes whose CRC held and that are no Record
                framing.bad.append((started, f"no W&B record ({type(exc).__name__})"))
            parts = b""
            framing.read_bytes = pos
