"""The one error type a user sees: what went wrong, and how to fix it."""

from __future__ import annotations

import errno
import tomllib
from pathlib import Path
from typing import Any

from honestscale import exits


class HonestscaleError(Exception):
    """An error caused by input or environment; the CLI prints ``message`` and ``fix`` and exits ``exit_code``
    (``exits.USAGE``: fix the command or the file; a store or disk unavailable now: ``exits.TEMPFAIL``)."""

    exit_code = exits.USAGE

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"


class Unavailable(HonestscaleError):
    """What the command needs is unavailable or full now (a disk, a server): run it again later."""

    exit_code = exits.TEMPFAIL


def read_toml(path: Path, error: type[HonestscaleError], what: str) -> dict[str, Any]:
    """A TOML file as a dict, or ``error`` naming the file (missing) or the line (malformed)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"no {what} at {path}", f"give the path of a {what}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}", "fix the line it names") from None
    except RecursionError:
        raise error(f"{path}: tables or arrays nested too deeply to read",
                    f"a {what} nests a few levels at most: fix the file") from None  # fmt: skip
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}", "check the path and that it is a text file") from None


_OS_FIXES = {
    errno.ENOSPC: "free space on that disk and run the same command again: what was stored before stays",
    errno.EDQUOT: "free space within your quota and run the same command again: what was stored before stays",
    errno.EACCES: "check the permissions of the file and its folder, or choose another path",
    errno.EPERM: "check the permissions of the file and its folder, or choose another path",
    errno.EROFS: "the file system is read-only: choose a path on a writable one",
    errno.ENOENT: "check the path",
}


def from_os_error(exc: OSError) -> HonestscaleError:
    """An operating-system error that escaped a command (a full disk, a permission), naming the file and the fix."""
    verb = "cannot write" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) else "cannot use"
    where = f" {exc.filename}" if exc.filename else ""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)  # a disk that fills: retry once there is room
    return (Unavailable if full else HonestscaleError)(
        f"{verb}{where}: {exc.strerror or exc}",
        _OS_FIXES.get(
            exc.errno or 0, "check the path, its permissions and the disk, and run the command again"
        ),
    )
