"""Reading a file's content (gzip included), hashing it, and cutting it into numbered lines."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class Content:
    data: bytes  # decompressed content
    note: str | None = None  # e.g. a truncated gzip stream


def read_content(path: Path) -> Content:
    """The file's bytes; for .gz the decompressed stream (multi-member, and as much as a cut stream holds)."""
    raw = path.read_bytes()
    if not path.name.endswith(".gz"):
        return Content(raw)
    out: list[bytes] = []
    rest = raw
    note = None
    while rest:
        dec = zlib.decompressobj(wbits=31)
        try:
            out.append(dec.decompress(rest))
        except zlib.error as exc:
            note = f"gzip data corrupt after {sum(map(len, out))} decompressed bytes ({exc}); kept what came before"
            break
        if not dec.eof:
            note = "gzip stream ends early (file cut or still being written); kept what it holds"
            break
        rest = dec.unused_data
    return Content(b"".join(out), note)


def digest(data: bytes | memoryview) -> str:
    """Content identity for change detection (not security): SHA-1, hardware-accelerated on x86 and ARM."""
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


@dataclass
class Lines:
    """Complete lines of ``data[start:]``, decoded, and the unterminated tail, if any."""

    first_number: int  # line number of text[0]
    text: pa.Array  # large_string, one per complete line, without newline; null where not UTF-8
    undecodable: list[tuple[int, bytes]]  # (line number, raw bytes) of the lines that are not UTF-8
    end: int  # offset just past the last complete line
    tail: bytes | None  # bytes after the last newline, when not empty


def split_lines(data: bytes, start: int, first_number: int) -> Lines:
    """Cut ``data[start:]`` into lines in Arrow (no Python object per line); check UTF-8 in one pass."""
    last_newline = data.rfind(b"\n", start)
    end = start if last_newline < 0 else last_newline + 1
    tail = data[end:] or None
    undecodable: list[tuple[int, bytes]] = []
    if end == start:
        return Lines(first_number, pa.array([], pa.large_string()), undecodable, end, tail)
    parts = pc.split_pattern(pa.array([data[start:end]], pa.large_binary()), pattern=b"\n").values
    parts = parts.slice(0, len(parts) - 1)  # the empty piece after the last newline
    try:
        text = parts.cast(pa.large_string())
    except pa.ArrowInvalid:  # some line is not UTF-8: find which, keep the others
        decoded: list[str | None] = []
        for i, raw in enumerate(parts.to_pylist()):
            try:
                decoded.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                decoded.append(None)
                undecodable.append((first_number + i, raw))
        text = pa.array(decoded, pa.large_string())
    if b"\r" in data[start:end]:
        text = pc.utf8_rtrim(text, characters="\r")
    return Lines(first_number, text, undecodable, end, tail)
