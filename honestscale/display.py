"""Names and paths as what is published may show them (standard library only; every presenter imports it).

Names come from users (run_start's campaign, run name, framework, system): one holding U+202E RIGHT-TO-LEFT
OVERRIDE shows ``evil\\u202egpj.exe`` as "evilexe.jpg" wherever it is printed as is. :func:`shown` replaces every
bidirectional control (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) and every other control or format
character with a visible escape (``\\u202e``), in the terminal, CSV and HTML alike (the HTML also isolates each name
in ``<bdi>``); :func:`file_name` does the same for a file name (``[U+202E]``). The zero-width joiner and non-joiner
stay: scripts and emoji need them and they reorder nothing.

Paths: a report or a dashboard is published, the store is not. :func:`shown_path` gives an event file relative to
the store's folder (or ``--path-root``), ``~/...`` under the home folder, else only its last parts; never the home
folder or an absolute path. :func:`shown_command` does the same for a command line, its interpreter named
``python`` (the report names the version beside it). The store keeps the full paths (``honestscale show RUN``).
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path, PurePath

# what reorders text (Unicode's bidirectional controls): named here so that a reader sees what is escaped
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
_KEPT = frozenset("\u200c\u200d")  # zero-width non-joiner and joiner: needed by scripts and emoji
_ESCAPED = (
    "Cc",
    "Cf",
    "Cs",
    "Zl",
    "Zp",
)  # controls, format characters, lone surrogates, line/paragraph separators
_NAME_UNSAFE = re.compile(r'[/\\:*?"<>|]')


def _hidden(ch: str, lines: bool) -> bool:
    if ch in BIDI:
        return True
    if ch in _KEPT or (lines and ch in "\n\t\r"):
        return False
    return unicodedata.category(ch) in _ESCAPED


def _escape(ch: str) -> str:
    code = ord(ch)
    if (
        0xDC80 <= code <= 0xDCFF
    ):  # a byte of a name that is not UTF-8, as os.fsdecode gives it: the byte itself
        return f"\\x{code - 0xDC00:02x}"  # as files.shown_path and the store write it
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: object) -> str:
    """A name as one line of text shows it: every bidirectional control, control and format character as a
    visible escape (``evil\\u202egpj.exe``); None as ""."""
    s = "" if text is None else str(text)
    if s.isprintable() and not any(ch in BIDI for ch in s):
        return s  # the common case: nothing to escape (isprintable is False for every escaped category)
    return "".join(_escape(ch) if _hidden(ch, lines=False) else ch for ch in s)


def pieces(text: object) -> list[tuple[str, bool]]:
    """The name as :func:`shown` gives it, in pieces: (text, False) as it is, (escape, True) for each escaped
    character (the HTML marks those)."""
    out: list[tuple[str, bool]] = []
    for ch in "" if text is None else str(text):
        if _hidden(ch, lines=False):
            out.append((_escape(ch), True))
        elif out and not out[-1][1]:
            out[-1] = (out[-1][0] + ch, False)
        else:
            out.append((ch, False))
    return out


def shown_text(text: str) -> str:
    """Text of several lines (a message, a quarantined line) with what :func:`shown` escapes escaped, line breaks
    and tabs kept."""
    if text.isprintable() and not any(ch in BIDI for ch in text):
        return text
    return "".join(_escape(ch) if _hidden(ch, lines=True) else ch for ch in text)


_NOT_PLAIN = re.compile(r"[^\x20-\x7e\n]")


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    if not _hidden(ch, lines=True):
        return ch
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(text: str) -> str:
    """JSON (``json.dumps`` with ``ensure_ascii=False``) with what :func:`shown` escapes written as JSON escapes
    (``\\u202e``): the same data to a program, a visible escape to a person reading it in a terminal."""
    return text if text.isascii() else _NOT_PLAIN.sub(_json_escape, text)


def file_name(text: str, limit: int = 80) -> str:
    """A name as part of a file name: controls as ``[U+202E]``, no path separator nor a character a file system
    refuses, at most ``limit`` characters (a longer one cut, with 8 hex digits of its hash to keep it distinct)."""
    s = "".join(f"[U+{ord(ch):04X}]" if _hidden(ch, lines=False) else ch for ch in text)
    s = _NAME_UNSAFE.sub("_", s).lstrip(".") or "_"
    if len(s) > limit:
        s = s[:limit] + "-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return s


def _home() -> str | None:
    try:
        home = str(Path.home())
    except (RuntimeError, KeyError):
        return None
    return home if home not in ("", "/") else None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def shown_path(path: object, root: str | os.PathLike[str] | None) -> str:
    """A path as a published report shows it: relative to ``root`` (the store's folder or ``--path-root``) where
    they share a folder below the home folder's parent; else ``~/...`` under the home folder; else ``…/`` and its
    last three parts. A relative path stays as it is. Never the home folder, never a machine's absolute path."""
    p = "" if path is None else str(path)
    if not Path(p).is_absolute():
        return shown(p)
    p = os.path.normpath(p)
    home = _home()
    if root is not None:
        base = str(Path(root).absolute())
        common = os.path.commonpath([p, base])
        # the folder both sit in: the root itself, or a folder that is neither "/" nor above the home folder
        beside = common != os.sep and not (home is not None and _under(home, common) and common != home)
        if common == base or beside:
            return shown(Path(os.path.relpath(p, base)).as_posix())
    if home is not None and _under(p, home):
        return shown("~/" + Path(os.path.relpath(p, home)).as_posix())
    parts = PurePath(p).parts[1:]
    return shown("…/" + "/".join(parts[-3:]))


_PYTHON = re.compile(r"python[0-9.]*(\.exe)?", re.IGNORECASE)


def shown_command(argv: Iterable[object], root: str | os.PathLike[str] | None) -> str:
    """A command line as a published report shows it: the interpreter (or program) by its name (``python`` for any
    Python, whose version the report names), every absolute path in it as :func:`shown_path` gives it."""
    out = []
    for i, arg in enumerate(map(str, argv)):
        if i == 0 and Path(arg).is_absolute():
            name = Path(arg).name
            out.append("python" if _PYTHON.fullmatch(name) else shown(name))
        elif arg.startswith("-") and "=" in arg and Path(arg.split("=", 1)[1]).is_absolute():
            key, value = arg.split("=", 1)
            out.append(f"{shown(key)}={shown_path(value, root)}")
        elif Path(arg).is_absolute():
            out.append(shown_path(arg, root))
        else:
            out.append(shown(arg))
    return " ".join(out)


def iso(ts: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC with milliseconds (a run's start and stop wherever they are shown)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = [
    "BIDI",
    "file_name",
    "iso",
    "json_text",
    "pieces",
    "shown",
    "shown_command",
    "shown_path",
    "shown_text",
]
