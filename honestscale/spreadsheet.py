"""CSV that a spreadsheet opens as data: a text cell never becomes a formula (CSV injection, OWASP).

Run names, campaigns and frameworks come from users; a cell such as ``=HYPERLINK(...)`` or ``@SUM(...)``
would run as a formula in Excel or LibreOffice. Every text cell that starts with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return, and is not a number, is written with a leading apostrophe (which spreadsheets show
as text and do not print); numbers, negative ones included, stay numbers. A name holding U+202E (right-to-left
override) would show as another name: every such character is written as a visible escape (``\u202e``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from honestscale.display import shown_text

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def defuse(cell: str) -> str:
    """The cell as a spreadsheet must read it: text, never a formula; bidirectional controls and other invisible
    characters as visible escapes (``display.shown_text``: a name never shows as another)."""
    cell = shown_text(cell)
    if not cell.startswith(_TRIGGERS):
        return cell
    try:
        float(cell)
    except ValueError:
        return "'" + cell
    return cell  # a number such as -0.5


def to_csv(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([defuse(h) for h in header])
    writer.writerows([defuse(c) for c in row] for row in rows)
    return buf.getvalue()
