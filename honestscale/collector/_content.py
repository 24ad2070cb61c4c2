"""Reading a file's content (gzip included), hashing it, and cutting it into numbered lines."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path


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
    text: list[str | None]  # one per complete line, without newline; None where not UTF-8
    undecodable: list[tuple[int, bytes]]  # (line number, raw bytes) of the lines that are not UTF-8
    end: int  # offset just past the last complete line
    tail: bytes | None  # bytes after the last newline, when not empty


def split_lines(data: bytes, start: int, first_number: int) -> Lines:
    last_newline = data.rfind(b"\n", start)
    end = start if last_newline < 0 else last_newline + 1
    complete, tail = data[start:end], data[end:]
    text: list[str | None]
    undecodable: list[tuple[int, bytes]] = []
    try:
        decoded = complete.decode("utf-8")
        if "\r" in decoded:
            decoded = decoded.replace("\r\n", "\n")
        text = list(decoded.split("\n")[:-1])
    except UnicodeDecodeError:
        text = []
        for i, raw in enumerate(complete.split(b"\n")[:-1]):
            try:
                text.append(raw.decode("utf-8").removesuffix("\r"))
            except UnicodeDecodeError:
                text.append(None)
                undecodable.append((first_number + i, raw))
    return Lines(first_number, text, undecodable, end, tail or None)
