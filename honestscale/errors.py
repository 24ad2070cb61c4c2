"""The one error type a user sees: what went wrong, and how to fix it."""

from __future__ import annotations


class HonestscaleError(Exception):
    """An error caused by input or environment; the CLI prints ``message`` and ``fix`` and exits 2."""

    exit_code = 2

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"
