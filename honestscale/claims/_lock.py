"""``claims lock``: each claim's run set, recorded beside the claims file (``FILE.lock.json``), so that a verdict
cannot drift silently as runs land later: the next check names every claim whose runs changed since."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from honestscale.claims._file import ClaimsError
from honestscale.claims._judge import Verdict

SCHEMA = "honestscale.claims-lock/1"


def lock_path(claims: Path) -> Path:
    return claims.with_name(claims.name + ".lock.json")


def write(claims: Path, verdicts: list[Verdict]) -> Path:
    """Record each claim's runs (ids and count); a claim without runs records none."""
    path = lock_path(claims)
    body = {
        "schema": SCHEMA,
        "locked_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "claims": {v.claim.id: {"runs": list(v.runs), "n": len(v.runs)} for v in verdicts},
    }
    staged = path.with_name(path.name + ".partial")
    staged.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    staged.replace(path)  # whole or not at all
    return path


def read(claims: Path) -> tuple[str, dict[str, list[str]]] | None:
    """(when it was locked, each claim's runs), or None without a lock file."""
    path = lock_path(claims)
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        return str(body["locked_at"]), {k: list(v["runs"]) for k, v in body["claims"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ClaimsError(
            f"{path}: not a claims lock ({exc})", f"delete it and run honestscale claims lock {claims} again"
        ) from None


def changes(verdicts: list[Verdict], locked: dict[str, list[str]], when: str) -> None:
    """Name, in each verdict's evidence, how its run set differs from the locked one."""
    for v in verdicts:
        if v.claim.id not in locked:
            v.changed = f"not in the lock of {when}: run honestscale claims lock to record it"
            continue
        before, now = set(locked[v.claim.id]), set(v.runs)
        if before != now:
            added, gone = sorted(now - before), sorted(before - now)
            parts = (
                [f"{len(added)} run(s) landed since ({', '.join(added[:3])}{' …' if len(added) > 3 else ''})"]
                if added
                else []
            )
            if gone:
                parts.append(
                    f"{len(gone)} run(s) gone ({', '.join(gone[:3])}{' …' if len(gone) > 3 else ''})"
                )
            v.changed = f"the runs behind it changed since the lock of {when}: " + "; ".join(parts)
