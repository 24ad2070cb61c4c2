"""What a reader of another tool's log hands the ingest: events with the line each came from, the lines it
could not read (quarantined, never skipped), and what the user should know about the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BadLine:
    line: int
    raw: str
    reason: str


@dataclass
class Parsed:
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (source line, event)
    bad: list[BadLine] = field(default_factory=list)
    other_lines: int = 0
    repeated: int = 0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unread_system: tuple[Path, str] | None = None  # a system description that could not be read, and why
    # the file whose run this one's lines are part of (nothing of its own lands)
    read_with: Path | None = None
    # why the file holds no run's results though its format is known (an MLflow run with parameters only): said in
    # the summary, never counted as results lost
    nothing_to_land: str | None = None
    profile: dict[str, Any] | None = None  # a profiler trace's steps: evidence beside a run (profile_steps)
    energy: list[dict[str, Any]] = field(
        default_factory=list
    )  # energy records (CodeCarbon, sacct): energy_records


class NeedsLibrary(Exception):
    """A reader that reads with its tool's own library, which is not installed: the file is refused (nothing of it
    lands, so a later ingest with the library reads it), named with the install command."""

    def __init__(self, package: str, extra: str, why: str = "") -> None:
        self.package, self.extra = package, extra
        super().__init__(
            f"reading it needs the {package} package, not installed here ({why or 'no module'}): "
            f"pip install 'honestscale[{extra}]', then ingest it again"
        )
