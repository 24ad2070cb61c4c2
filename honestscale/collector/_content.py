"""Reading a file's content (gzip included), hashing it, and cutting it into numbered lines."""

from __future__ import annotations

import hashlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from honestscale.files import kind_of

LIMIT_ENV = "HONESTSCALE_MAX_FILE_MB"
RATIO_ENV = "HONESTSCALE_MAX_GZIP_RATIO"
GZIP_RATIO = 100.0  # decompressed / compressed bytes: event files compress 5-10x, a gzip bomb about 1,000x
GZIP_FREE = 16 << 20  # decompressed bytes a .gz may always hold, whatever its ratio
LINE_LIMIT = 4 << 20  # bytes: an event line is a few KiB; a longer one is quarantined, not parsed
BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20


class NotRegular(OSError):
    """The path is a FIFO, a device or a socket (or a symlink to one): reading it could hang or never end."""


class TooLarge(OSError):
    """The file (decompressed, for .gz) holds more than the limit: a gzip bomb, /dev/zero behind a link."""


@dataclass
class Content:
    data: bytes  # decompressed content
    note: str | None = None  # e.g. a truncated gzip stream


def max_file_bytes() -> int:
    """What one file may hold, decompressed: ``HONESTSCALE_MAX_FILE_MB`` (1024 MiB by default)."""
    value = os.environ.get(LIMIT_ENV, "1024")
    try:
        mib = float(value)
    except ValueError:
        mib = -1.0
    if not mib > 0:
        raise TooLarge(f"{LIMIT_ENV}={value!r} is not a size in MiB; unset it, or set e.g. {LIMIT_ENV}=1024")
    return int(mib * 2**20)


def max_gzip_ratio() -> float:
    """How many times its compressed size a .gz may decompress to (past :data:`GZIP_FREE`):
    ``HONESTSCALE_MAX_GZIP_RATIO`` (100 by default)."""
    value = os.environ.get(RATIO_ENV, str(GZIP_RATIO))
    try:
        ratio = float(value)
    except ValueError:
        ratio = -1.0
    if not ratio >= 1:
        raise TooLarge(
            f"{RATIO_ENV}={value!r} is not a ratio of at least 1; unset it, or set e.g. {RATIO_ENV}=100"
        )
    return ratio


def _gzip_bomb(path: Path, bound: int, compressed: int, ratio: float) -> TooLarge:
    return TooLarge(
        f"{path} decompresses to more than {bound / 2**20:,.0f} MiB, over {ratio:g} times its {compressed:,} "
        f"compressed bytes (event files compress 5-10 times): not read, a gzip bomb?; if it is real, raise "
        f"{RATIO_ENV}"
    )


def _too_large(path: Path, limit: int, what: str) -> TooLarge:
    return TooLarge(
        f"{path} {what} more than {limit / 2**20:,.0f} MiB: not read (a gzip bomb, or a link to an endless "
        f"file?); if it is real, raise {LIMIT_ENV}"
    )


def read_content(path: Path) -> Content:
    """The file's bytes; for .gz the decompressed stream (multi-member, and as much as a cut stream holds).

    Only regular files are read (opened without blocking, checked on the open file, so a FIFO put in place after
    discovery cannot hang the ingest), and never more than :func:`max_file_bytes`, decompressed. A .gz is
    decompressed a MiB at a time and refused (:class:`TooLarge`) as soon as it holds more than
    :func:`max_gzip_ratio` times its compressed size (and more than :data:`GZIP_FREE`): a gzip bomb costs what
    that bound allows, never what it would expand to.
    """
    limit = max_file_bytes()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        what = kind_of(info.st_mode)
        if what is not None:
            raise NotRegular(f"{path} is {what}, not a regular file: not read")
        if info.st_size > limit and not path.name.endswith(".gz"):
            raise _too_large(path, limit, "holds")
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise _too_large(path, limit, "holds")
    if not path.name.endswith(".gz"):
        return Content(raw)
    ratio = max_gzip_ratio()
    bound = max(int(ratio * len(raw)), GZIP_FREE)
    out: list[bytes] = []
    total = 0
    rest = raw
    note = None
    while rest:
        dec = zlib.decompressobj(wbits=31)
        try:
            while not dec.eof:
                piece = dec.decompress(rest, _CHUNK)
                rest = dec.unconsumed_tail
                total += len(piece)
                if total > limit:
                    raise _too_large(path, limit, "decompresses to")
                if total > bound:
                    raise _gzip_bomb(path, bound, len(raw), ratio)
                out.append(piece)
                if not piece and not rest:
                    break
        except zlib.error as exc:
            note = f"gzip data corrupt after {total} decompressed bytes ({exc}); kept what came before"
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
    # the bytes as one binary value, without a copy (and without pa.array, whose input check imports pandas)
    whole = pa.Array.from_buffers(
        pa.large_binary(),
        1,
        [None, pa.py_buffer(np.array([0, end - start], np.int64)), pa.py_buffer(data)[start:end]],
    )
    parts = pc.split_pattern(whole, pattern=b"\n").values
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
