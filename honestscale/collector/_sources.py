"""Finding input files: paths, folders (recursively) and globs, and telling native event files from MLPerf logs."""

from __future__ import annotations

import glob
import gzip
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from honestscale.collector import importers
from honestscale.collector._mlperf_lines import FORMATS_READ, UNKNOWN_FORMAT
from honestscale.errors import HonestscaleError
from honestscale.files import kind_of, shown_path

# "native", "mlperf", "horovod-timeline", or an importer's format (importers.FORMATS)
Format = str

NATIVE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
# a record, not a mention (a README quoting the format): v0.7 on, and v0.6's ':::MLL <unix seconds> key: {'
MLLOG_RECORD = re.compile(rb':::MLLOG\s*\{\s*"|:::MLL [0-9]+(?:\.[0-9]*)? [A-Za-z_][\w.]*: \{')
# MLPerf results in a format no supported round wrote: the reader's own pattern, on bytes
MLPERF_LIKE = re.compile(UNKNOWN_FORMAT.pattern.encode(), UNKNOWN_FORMAT.flags & re.MULTILINE)
_SNIFF_BYTES = 1 << 20
# how far a text file whose first MiB matches nothing is read on: --watch classifies every file at every poll, so an
# unrelated log of gigabytes must not be read whole each time (a tool's first record comes within this, or never)
_SCAN_BYTES = 64 << 20
# the first line of a honestscale event file: an object whose first field is the contract version (events.py
# writes "schema" first); anything else in a .jsonl file is looked at by the importers
_NATIVE_FIRST = re.compile(rb'(?:\xef\xbb\xbf)?\s*\{\s*"schema"\s*:')


class InputError(HonestscaleError):
    """A path given on the command line cannot be used."""


@dataclass(frozen=True)
class Source:
    path: Path  # absolute
    format: Format
    # the other formats its content also looks like: the ingest reads it as each and lands the one that reads
    # something, or refuses it naming them all (never one of two in silence)
    also: tuple[Format, ...] = ()
    # its content is what its format reads (an event line, a tool's record); False for a file taken as events by its
    # name alone (``*.jsonl`` with no event line in its first MiB): the quarantine keeps its lines' reasons, not text
    recognised: bool = True

    @property
    def key(self) -> str:
        """The path as the store keeps it (``files.shown_path``: a name that is not UTF-8 with backslash escapes)."""
        return shown_path(self.path)


SYSTEM_FILE = "MLPerf system description: read with the result logs of its system"
POWER_FILE = "MLPerf power log: read with its result log"
SCALING_FILE = "MLPerf review scaling factor (scaling.json): read with the result logs beside it"
HF_CHECKPOINT = (
    "a Trainer checkpoint's trainer_state.json: the training's later state (the final one, or a later checkpoint's) "
    "holds all of it"
)
LIGHTNING_HPARAMS = "Lightning's hparams.yaml: read with the metrics.csv or TensorBoard event file beside it"
MLFLOW_RUN_FILE = (
    "an MLflow run's metric, parameter or tag, or its experiment's meta.yaml: read with the run's meta.yaml"
)
NOT_REGULAR = "only regular files are read"
# a link is opened only where it resolves under a path given (or under --follow-links DIR): a link out of the tree would
# put what it points to (/etc/passwd, another user's files) into a store that a whole centre reads
LINK_OUT = "links that resolve outside the paths given, not opened (--follow-links DIR opens those that resolve under DIR)"
LINK_DANGLING = "links to nothing (their target does not exist here), not opened"
NOT_RESULTS = "neither a honestscale event file nor an MLPerf log nor a log an importer reads"
UNKNOWN_MLPERF = (
    f"MLPerf lines in a format this reader does not know ({FORMATS_READ}): its results did not land"
)


@dataclass(frozen=True)
class Skipped:
    """A file found in a folder that does not land as a source of its own, and why."""

    path: Path
    reason: str

    @property
    def lost(self) -> bool:
        """It holds results this reader cannot use (not a file read beside a log, not an unrelated file)."""
        return self.reason == UNKNOWN_MLPERF or self.reason.endswith(NOT_REGULAR)

    @property
    def link(self) -> bool:
        """A link not followed (out of the paths given, or to nothing): listed with -v, never an exit code."""
        return self.reason in (LINK_OUT, LINK_DANGLING)

    @property
    def beside(self) -> bool:
        """It is read with the MLPerf result logs beside it (system description, power log, scaling factor)."""
        return self.reason in (
            SYSTEM_FILE,
            POWER_FILE,
            SCALING_FILE,
            HF_CHECKPOINT,
            LIGHTNING_HPARAMS,
            MLFLOW_RUN_FILE,
        )


@dataclass
class Discovery:
    sources: list[Source]
    skipped: list[Skipped]  # files inside given folders that do not land as sources, with the reason


def _is_native_name(path: Path) -> bool:
    return path.name.endswith(NATIVE_SUFFIXES)


def _head(path: Path, size: int = _SNIFF_BYTES) -> bytes:
    """The first ``size`` bytes (decompressed); the caller has checked that ``path`` is a regular file."""
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as fh:
                return fh.read(size)
        except (OSError, EOFError, zlib.error):
            return b""
    with path.open("rb") as fh:
        return fh.read(size)


def classify(path: Path) -> Format | None:
    """The first of :func:`classify_all`, or None."""
    found = classify_all(path)
    return found[0] if found else None


def classify_all(path: Path) -> tuple[Format, ...]:
    """By content, every format the file looks like: ``mlperf`` for a file with a :::MLLOG record, an importer's
    format for another tool's log (torchtitan's metrics are ``.jsonl`` too), ``native`` for other .jsonl files
    (their lines are events, or quarantined as not events), ``horovod-timeline`` for horovod-timeline*.json;
    empty for none. The first MiB decides, unless it matches nothing and the file is text: then the rest is read
    too (a log whose first lines are a MiB of warnings)."""
    return _classified(path)[0]


def _classified(path: Path) -> tuple[tuple[Format, ...], bool]:
    """``classify_all``'s formats, and whether the content says so (False for a file taken as events by its name
    alone: a ``.jsonl`` whose first MiB holds no event line), from the one reading of its head."""
    if path.name.startswith("horovod-timeline") and path.name.endswith(".json"):
        return ("horovod-timeline",), True
    try:
        if _is_native_name(path) and _NATIVE_FIRST.match(_head(path, 4096)):
            return (
                "native",
            ), True  # the common case, decided by its first line (every poll of --watch asks)
        head = _head(path)
    except OSError:
        head = b""
    # a UTF-8 byte order mark (Excel's CSVs): the readers drop it too
    found = _formats(path, head.removeprefix(b"\xef\xbb\xbf"))
    if not found and len(head) == _SNIFF_BYTES and b"\0" not in head:
        found = _formats_later(path)
    if not found and _is_native_name(
        path
    ):  # its first line may be cut short: an event line later still counts
        return ("native",), b'"schema"' in head and b'"kind"' in head
    return found, True


def _formats(path: Path, text: bytes) -> tuple[Format, ...]:
    mlperf = ("mlperf",) if MLLOG_RECORD.search(text) else ()
    return (*mlperf, *(r.format for r in importers.sniff_all(path, text)))


def _formats_later(path: Path) -> tuple[Format, ...]:
    """The formats of the first later MiB of a text file that looks like any (each window starts at a line, so a
    log's lines are whole in it), up to its end or its first _SCAN_BYTES."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            fh.read(_SNIFF_BYTES)
            carry, first = b"", True
            read = _SNIFF_BYTES
            while read < _SCAN_BYTES and (chunk := fh.read(_SNIFF_BYTES)):
                read += len(chunk)
                window = carry + chunk
                start = window.find(b"\n") + 1 if first else 0  # the line the first MiB cut
                first = False
                cut = window.rfind(b"\n") + 1 or len(window)
                if b"\0" in chunk:
                    return ()  # binary after all
                if found := _formats(path, window[start:cut]):
                    return found
                carry = window[cut:]
    except (OSError, EOFError, zlib.error):
        return ()
    return ()


def _mlperf_like(path: Path) -> bool:
    try:
        return bool(MLPERF_LIKE.search(_head(path)))
    except OSError:
        return False


def _mlflow_part(path: Path) -> bool:
    """A file of MLflow's file store read with a run's meta.yaml: a metric's, parameter's or tag's file in a run's
    folder (``<run>/metrics/system/cpu_utilization_percentage``: a key's slashes are folders), or an experiment's
    meta.yaml (its runs are folders beside it; the default experiment's may have none)."""
    if path.name == "meta.yaml":  # an experiment's: its name and where its artifacts go, no run id
        text = _head(path, 4096)
        return b"\nname: " in text and b"artifact_location: " in text and b"\nrun_id: " not in text
    for part in path.parents:
        if part.name in ("metrics", "params", "tags") and (part.parent / "meta.yaml").is_file():
            return True
    return False


def _read_beside(cand: Path, strict: bool) -> str | None:
    """Why ``cand`` is read with another file (an MLPerf system description, a Trainer's earlier checkpoint state,
    Lightning's hparams.yaml, an MLflow run's files, a scaling factor), never on its own; None where it is not."""
    if cand.parent.name == "systems" and cand.suffix == ".json":
        return SYSTEM_FILE
    if _superseded_checkpoint(cand):
        return HF_CHECKPOINT
    if cand.name == "hparams.yaml" and (
        (cand.parent / "metrics.csv").is_file() or any(cand.parent.glob("events.out.tfevents.*"))
    ):
        return LIGHTNING_HPARAMS
    if not strict and _mlflow_part(cand):
        return MLFLOW_RUN_FILE
    return SCALING_FILE if cand.name == "scaling.json" else None


@dataclass
class _Links:
    """Which links of a folder's walk are opened: those that resolve under ``roots`` (the folder given, and
    --follow-links' folders); the others are named in ``skipped``."""

    roots: list[Path]
    skipped: list[Skipped]

    def opened(self, link: Path) -> bool:
        target = link.resolve()
        if not target.exists():
            self.skipped.append(Skipped(link, LINK_DANGLING))
            return False
        if not any(target.is_relative_to(root) for root in self.roots):
            self.skipped.append(Skipped(link, LINK_OUT))
            return False
        return True

    def inside_walk(self, link: Path, walked: Path) -> bool:
        """A linked folder whose target the walk reaches anyway by its own name: its files are read once, there."""
        return link.resolve().is_relative_to(walked)


def _walk(folder: Path, links: _Links) -> list[Path]:
    """The files of a folder, hidden ones left out, in order: a linked file where ``links`` opens it, a linked folder
    walked where ``links`` opens it and the walk does not reach its target by its own name (os.walk never follows
    one); the links it does not open are named in ``links.skipped``."""
    found: list[Path] = []
    walked = folder.resolve()
    todo = [folder]
    while todo:
        for root, dirs, files in os.walk(todo.pop(0)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for d in dirs:
                sub = Path(root) / d
                if sub.is_symlink() and links.opened(sub) and not links.inside_walk(sub, walked):
                    todo.append(sub)
            for name in sorted(files):
                file = Path(root) / name
                if not name.startswith(".") and (not file.is_symlink() or links.opened(file)):
                    found.append(file)
    return found


def discover(args: list[str], follow_links: Sequence[Path] = ()) -> Discovery:
    """Expand command-line PATH arguments into sources; refuse (before anything lands) paths that do not exist.

    A file named on the command line must be an event file or an MLPerf log; inside a
    folder, other files (system descriptions, scripts, READMEs) are skipped and counted. A link inside a folder is
    opened only where it resolves under a path given or under one of ``follow_links`` (a file reached through two
    names is read once, by its own); any other link is named (``LINK_OUT``, ``LINK_DANGLING``), never opened.
    """
    sources: dict[Path, Source] = {}
    skipped: list[Skipped] = []
    allowed = [Path(f).resolve() for f in follow_links]
    for arg in args:
        # an MLflow tracking URI of a SQLite store, as MLflow's users name it: sqlite:///mlflow.db (relative),
        # sqlite:////abs/path/mlflow.db (absolute); a file store's: file:///abs/path/mlruns
        arg = arg.removeprefix("sqlite:///") if arg.startswith("sqlite:///") else arg.removeprefix("file://")
        if glob.has_magic(arg):
            matches = sorted(glob.glob(arg, recursive=True))  # noqa: PTH207 - the user's pattern, absolute or not
            if not matches:
                raise InputError(
                    f"no file matches {arg!r}", "check the pattern; quote it so the shell does not expand it"
                )
            explicit = [Path(m) for m in matches]
            from_glob = True
        else:
            explicit = [Path(arg)]
            from_glob = False
        for path in explicit:
            if not path.exists():
                raise InputError(f"no such file or folder: {path}", "check the path; nothing was ingested")
            if path.is_dir():
                candidates, strict = _walk(path, _Links([path.resolve(), *allowed], skipped)), False
            else:
                candidates, strict = [path], not from_glob
            for cand in candidates:
                try:
                    what = kind_of(cand.stat().st_mode)
                except OSError as exc:  # a dangling link, a file removed meanwhile
                    skipped.append(Skipped(cand, f"cannot be read ({exc.strerror}): {NOT_REGULAR}"))
                    continue
                if what is not None and what != "a folder":
                    # a FIFO would hang the read, /dev/zero would never end: named, never opened
                    linked = f" (a link to {cand.resolve()})" if cand.is_symlink() else ""
                    skipped.append(Skipped(cand, f"{what}{linked}, not a file: {NOT_REGULAR}"))
                    continue
                if (reason := _read_beside(cand, strict)) is not None:
                    skipped.append(Skipped(cand, reason))
                    continue
                if cand.parent.parent.name == "power" and cand.suffix == ".txt":
                    if strict:
                        raise InputError(
                            f"{cand} is an MLPerf power log, not a result log",
                            f"ingest its result log ({cand.parent.parent.parent}/{cand.parent.name}.txt): "
                            "the energy is read from power/ beside it",
                        )
                    skipped.append(Skipped(cand, POWER_FILE))
                    continue
                found, known = _classified(cand)
                fmt = found[0] if found else None
                if fmt is None and _mlperf_like(cand):
                    skipped.append(Skipped(cand, UNKNOWN_MLPERF))  # named, and the ingest exits 3
                    continue
                if fmt is None:
                    if strict:
                        raise InputError(
                            f"{cand} is neither a honestscale event file (*.jsonl, *.jsonl.gz) "
                            f"nor an MLPerf log (no ':::MLLOG' line in its first MiB) nor a log an importer reads "
                            f"({importers.KNOWN})",
                            "rename event files to .jsonl, or pass the folder that holds them; to record your own "
                            "training as event files, see docs/record.md (honestscale.record)",
                        )
                    skipped.append(Skipped(cand, NOT_RESULTS))
                    continue
                resolved = cand.resolve()
                sources.setdefault(resolved, Source(resolved, fmt, found[1:], recognised=known))
    return Discovery(list(sources.values()), skipped)


def _step_of(folder: Path) -> int:
    tail = folder.name.removeprefix("checkpoint-")
    return int(tail) if tail.isdigit() else -1


def _superseded_checkpoint(path: Path) -> bool:
    """A ``checkpoint-N/trainer_state.json`` beside the output folder's own (final) state or a later checkpoint's:
    the same training's state at an earlier step, which the later one contains."""
    folder = path.parent
    if path.name != "trainer_state.json" or not folder.name.startswith("checkpoint-"):
        return False
    output = folder.parent
    if (output / "trainer_state.json").is_file():
        return True
    later = [d for d in output.glob("checkpoint-*") if _step_of(d) > _step_of(folder)]
    return any((d / "trainer_state.json").is_file() for d in later)
