"""Suppressions with a written reason, from a campaign spec or a honestscale.toml.

    [tool.honestscale.lint]
    ignore = [
        { code = "HS106", reason = "digits fits in memory on every node; I/O is not part of this question" },
    ]

In a campaign spec an entry applies to that campaign; in ``honestscale.toml`` it must name the
campaign (``campaign = "..."``). An entry without a reason is refused: the report prints the reason
beside the rule it silences.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from honestscale.errors import HonestscaleError, read_toml
from honestscale.lint._engine import Suppression
from honestscale.lint._runner import by_name, registry
from honestscale.view import View

MIN_REASON = 10


class ConfigError(HonestscaleError):
    """A suppression is malformed: the message names where and what is missing."""


def _table(doc: dict[str, Any]) -> list[Any]:
    lint = ((doc.get("tool") or {}).get("honestscale") or {}).get("lint") or {}
    unknown = set(lint) - {"ignore"}
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))} in [tool.honestscale.lint]",
                          "only ignore = [{ code, reason, campaign }] is read")  # fmt: skip
    entries = lint.get("ignore", [])
    if not isinstance(entries, list):
        raise ConfigError(
            "[tool.honestscale.lint] ignore must be a list of tables",
            'ignore = [{ code = "HS106", reason = "..." }]',
        )
    return entries


def parse(doc: dict[str, Any], source: str, campaign: str | None) -> list[Suppression]:
    known = registry()
    out = []
    for i, entry in enumerate(_table(doc), start=1):
        where = f"{source}: [tool.honestscale.lint] ignore entry {i}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} is not a table", '{ code = "HS106", reason = "..." }')
        given = str(entry.get("code", "")).strip()
        code, note = given.upper(), None
        if code not in known:  # a rule's name (or a name it had before) names it too; a prefix does not
            named = by_name(given, known)
            if named is None:
                raise ConfigError(f"{where}: unknown rule code {entry.get('code')!r}",
                                  f"one of {', '.join(known)}, or a rule's name (honestscale lint --rules-doc)")  # fmt: skip
            code, note = named[0].code, named[1]
        reason = str(entry.get("reason", "")).strip()
        if len(reason) < MIN_REASON:
            raise ConfigError(f"{where} ({code}) has no written justification",
                              "add reason = \"why this rule does not apply to this campaign\"")  # fmt: skip
        target = entry.get("campaign", campaign)
        if not target:
            raise ConfigError(f"{where} ({code}) does not name the campaign it applies to",
                              'add campaign = "<name>": suppressions apply to one campaign only')  # fmt: skip
        if campaign is not None and target != campaign:
            raise ConfigError(f"{where} names campaign {target!r} inside the spec of {campaign!r}",
                              "a spec may only suppress rules for its own campaign")  # fmt: skip
        out.append(Suppression(code, str(target), reason, source, f"{where}: {note}" if note else None))
    return out


def load_suppressions(view: View) -> list[Suppression]:
    """The suppressions recorded with each campaign's spec."""
    out: list[Suppression] = []
    for name, spec in view.campaigns.items():
        out += parse(spec, f"campaign {name} spec", name)
    return out


def load_file(path: Path) -> list[Suppression]:
    return parse(read_toml(path, ConfigError, "honestscale.toml"), str(path), None)


def load_default(path: Path | None) -> list[Suppression]:
    """The suppressions of ``--config PATH``, else of ./honestscale.toml where there is one, else none."""
    if path is None:
        path = Path("honestscale.toml")
        if not path.is_file():
            return []
    return load_file(path)
