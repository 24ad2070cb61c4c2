"""``claims check paper.tex``: every ``\\hs{...}`` number a paper uses, checked against the store as it is now.

The paper ``\\input``s the ``numbers.tex`` a report wrote; each macro it uses is *unchanged* (the runs behind it
and its value are those the file recorded), *changed* since the file was written (new runs landed, a run was
re-ingested: the old and the new number said), *not quotable* (an error-severity rule now fails on its runs),
*gone* (the store has no such number any more) or *undefined* (the file never defined it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from honestscale import exits
from honestscale.claims._file import ClaimsError
from honestscale.report import TexNumber, analyse, numbers, read_numbers_tex
from honestscale.view import View

UNCHANGED, CHANGED, NOT_QUOTABLE, GONE, UNDEFINED, RENAMED = (
    "unchanged",
    "changed",
    "not quotable",
    "gone",
    "undefined",
    "renamed",
)
_INPUT = re.compile(r"\\(?:input|include)\s*\{([^}]+)\}")
_USE = re.compile(r"\\hs\s*\{([^}]+)\}")
_FORMS = ("/value", "/ci", "/n", "/rules")


@dataclass(frozen=True)
class MacroVerdict:
    key: str  # as the paper uses it
    line: int
    verdict: str
    reason: str

    def as_json(self) -> dict[str, object]:
        return {"key": self.key, "line": self.line, "verdict": self.verdict, "reason": self.reason}


def _uncommented(text: str) -> list[str]:
    """The paper's lines without their comments (an unescaped % to the end of the line)."""
    return [re.sub(r"(?<!\\)%.*", "", line) for line in text.splitlines()]


def numbers_file(paper: Path, lines: list[str]) -> Path:
    """The ``numbers.tex`` the paper inputs (the first input file that defines ``\\hsdef``)."""
    for line in lines:
        for name in _INPUT.findall(line):
            path: Path = paper.parent / str(name).strip()
            for candidate in (path, path.with_name(path.name + ".tex")):
                if candidate.is_file() and "\\hsdef{" in candidate.read_text(
                    encoding="utf-8", errors="replace"
                ):
                    return candidate
    raise ClaimsError(
        f"{paper}: inputs no numbers.tex (no \\input'ed file defines \\hsdef)",
        "copy the numbers.tex a report wrote beside the paper and \\input{numbers} in its preamble",
    )


def current(view: View) -> dict[str, TexNumber]:
    """Every number a report of each campaign of the store would write now, by key."""
    out: dict[str, TexNumber] = {}
    for campaign in sorted({r.campaign for r in view.runs}, key=lambda c: (c is None, c or "")):
        model, _ = analyse(
            view.keeping(view.campaign_runs(campaign)), campaign
        )  # no campaign: one report too
        out.update((t.key, t) for t in numbers(model))
    return out


def check_paper(view: View, paper: Path) -> tuple[Path, list[MacroVerdict]]:
    try:
        lines = _uncommented(paper.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ClaimsError(
            f"cannot read {paper}: {exc}", "give the path of the paper's main .tex file"
        ) from None
    source = numbers_file(paper, lines)
    recorded = read_numbers_tex(source.read_text(encoding="utf-8"))
    now = current(view)
    by_fingerprint = {t.fingerprint: k for k, t in now.items()}
    out, seen = [], set()
    for i, line in enumerate(lines, start=1):
        for key in _USE.findall(line):
            if key in seen:
                continue
            seen.add(key)
            base = next((key[: -len(f)] for f in _FORMS if key.endswith(f)), key)
            was, t = recorded.get(base), now.get(base)
            moved = by_fingerprint.get(str(was["fp"])) if t is None and was is not None else None
            got = _renamed(was, moved) if moved and was is not None else _verdict(base, was, t, source)
            out.append(MacroVerdict(key, i, *got))
    return source, out


def _renamed(was: dict[str, object], moved: str) -> tuple[str, str]:
    """A key the store no longer defines whose very number (its runs and value) another key now names."""
    return (
        RENAMED,
        f"{was['text']} (n = {was['n']}) is now \\hs{{{moved}}}: use that key, or write the report again",
    )


def _verdict(key: str, was: dict[str, object] | None, t: TexNumber | None, source: Path) -> tuple[str, str]:
    if was is None:
        return UNDEFINED, f"{source.name} defines no {key}: write the report again, or use a key it defines"
    if t is None:
        return (
            GONE,
            f"the store has no {key} now (was {was['text']}): its runs are gone or no longer one point",
        )
    changed = (
        f"changed since {source.name} was written: {was['text']} then, {t.text} now "
        f"(n = {was['n']} then, {t.n} now)"
    )
    if t.do_not_quote:
        quote = f"do not quote: error-severity {', '.join(t.rules['error'])} fails on its runs ({t.text})"
        return NOT_QUOTABLE, quote + (f"; and {changed}" if t.fingerprint != was["fp"] else "")
    if t.fingerprint != was["fp"]:
        return CHANGED, f"{changed}: write the report again and rebuild the paper"
    return UNCHANGED, f"{t.text} (n = {t.n}), as written"


def exit_code(verdicts: list[MacroVerdict]) -> int:
    return exits.OK if all(v.verdict == UNCHANGED for v in verdicts) else exits.FAILED
