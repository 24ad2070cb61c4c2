"""What an ingest did, file by file: the summary the commands print and the exit code they take from it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from honestscale.collector import importers
from honestscale.collector._sources import HF_CHECKPOINT, Skipped


@dataclass
class FileResult:
    path: Path
    format: str
    # new | grown | forced | unchanged; kept: the file shrank or changed after it landed, and the store keeps
    # what it had (exit 3, --force replaces it); refused: not a regular file, or larger than the limit
    action: str
    events: int = 0
    duplicates: int = 0
    quarantined: int = 0
    conflicts: int = 0  # events that claim a stored (run, rank, seq) with other content
    other_lines: int = 0
    run_ids: set[str] = field(default_factory=set)
    # For the user to look at (hardware unknown, empty file ...), and for the record (repeated MLLOG lines).
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unread_system: tuple[Path, str] | None = None  # an MLPerf system description that could not be read
    # its lines belong to that file's run (a torchtitan system log beside its metrics)
    read_with: Path | None = None
    nothing_to_land: str | None = None  # why the file holds no run's results (Parsed.nothing_to_land)
    profile_steps: int = 0  # profiled steps landed as evidence (a profiler trace)
    energy_records: int = 0  # energy records landed (CodeCarbon, Slurm accounting)
    recognised: bool = (
        True  # its content is its format's (``Source.recognised``); else taken by its name alone
    )


STALE_SHOWN = 10  # files named in the note on files an earlier reader landed


@dataclass
class Summary:
    files: list[FileResult] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    timeline_steps: int = 0  # steps whose communication time came from a Horovod timeline
    # the store's files landed by an earlier version of their reader: (path, that reader, today's)
    stale: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def events(self) -> int:
        return sum(f.events for f in self.files)

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files)

    @property
    def duplicates(self) -> int:
        return sum(f.duplicates for f in self.files)

    @property
    def conflicts(self) -> int:
        return sum(f.conflicts for f in self.files)

    @property
    def runs(self) -> int:
        return len(set().union(*(f.run_ids for f in self.files))) if self.files else 0

    @property
    def changed(self) -> int:
        return sum(1 for f in self.files if f.action != "unchanged")

    def stale_note(self) -> str | None:
        """The store's files (named or not this time) landed by an earlier version of their reader, and the command
        that reads them again; None when there are none."""
        if not self.stale:
            return None
        shown = [shlex.quote(path) for path, _, _ in self.stale[:STALE_SHOWN]]
        more = f" (and {len(self.stale) - STALE_SHOWN} more: `honestscale ingest` their folders)" if len(
            self.stale) > STALE_SHOWN else ""  # fmt: skip
        readers = sorted({f"{was} -> {now}" for _, was, now in self.stale})
        return (f"{len(self.stale)} file(s) in the store were landed by an earlier reader ({'; '.join(readers)}), "
                f"which reads them differently: `honestscale ingest {' '.join(shown)}` reads them again{more}")  # fmt: skip

    def not_landed(self) -> list[tuple[Path, str]]:
        """Files that hold results and landed nothing, and system descriptions that could not be read: each
        with its reason. Any of them makes the ingest exit 3."""
        out = [(k.path, k.reason) for k in self.skipped if k.lost]
        out += [
            (
                f.path,
                (
                    f"holds {importers.label(f.format)} lines but landed no event: "
                    if f.recognised
                    else "is named as an event file but holds no honestscale event line (the quarantine keeps each "
                    "line's number and reason, not its text): "
                )
                + ("; ".join(f.warnings) or "see above"),
            )
            for f in self.files
            if f.action not in ("unchanged", "kept", "refused")
            and f.events == 0
            and f.duplicates == 0  # a copy of a log landed before lands nothing new: it is not lost
            and f.read_with is None
            and f.nothing_to_land is None
            and not f.profile_steps
            and not f.energy_records
            and (f.quarantined or f.format != "native")
        ]
        out += [(f.path, "; ".join(f.warnings)) for f in self.files if f.action in ("kept", "refused")]
        systems = {f.unread_system for f in self.files if f.unread_system is not None}
        out += sorted((path, f"system description not read: {why}") for path, why in systems)
        return out

    def line(self) -> str:
        unchanged = len(self.files) - self.changed
        text = (
            f"{len(self.files)} files ({unchanged} unchanged): {self.events:,} events landed, "
            f"{self.runs} runs touched, {self.quarantined:,} lines quarantined"
        )
        if self.duplicates:
            text += f", {self.duplicates:,} duplicate events skipped"
        if self.conflicts:
            conflicted = sum(1 for f in self.files if f.conflicts)
            text += (
                f", {self.conflicts:,} CONFLICTING events in {conflicted} file(s) held in the quarantine "
                "(a run id claimed by two different runs)"
            )
        if self.skipped:
            used = sum(1 for k in self.skipped if k.beside and k.reason != HF_CHECKPOINT)
            earlier = sum(1 for k in self.skipped if k.reason == HF_CHECKPOINT)
            links = sum(1 for k in self.skipped if k.link)
            other = len(self.skipped) - used - earlier - links
            if used:
                text += (
                    f", {used} files read with the logs beside them (MLPerf system/power/scaling, Lightning "
                    "hparams.yaml, MLflow run files)"
                )
            if earlier:
                text += (
                    f", {earlier} earlier Trainer checkpoint states left to the later state that holds them"
                )
            if other:
                text += f", {other} other files not landed (each named above with its reason)"
            if links:
                text += f", {links} links not opened (out of the paths given, or to nothing: -v lists them)"
        profiled = sum(f.profile_steps for f in self.files)
        if profiled:
            text += f", {profiled:,} profiled steps as evidence"
        energy = sum(f.energy_records for f in self.files)
        if energy:
            text += f", {energy:,} energy records (joined to runs when read)"
        if self.timeline_steps:
            text += f", communication of {self.timeline_steps:,} steps from Horovod timelines"
        return text
