"""What honestscale reads and writes on disk: only regular files (never a FIFO, a device or a link to one), output
folders swapped in whole, and Ctrl-C held back while a swap is half done."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from honestscale.errors import HonestscaleError


class OutputError(HonestscaleError):
    """An output path that is not a regular file or a new path (a device, a FIFO, a symlink, a folder)."""


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path as text that any store, terminal and page can hold: itself where its name is UTF-8, else its bytes as
    the OS gives them with each byte that is not UTF-8 as a backslash escape (``r-\\xff\\xfe/events-rank0.jsonl``).
    Python names such bytes with lone surrogates (``os.fsdecode``), which DuckDB, JSON and a UTF-8 terminal refuse."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def kind_of(mode: int) -> str | None:
    """None for a regular file, else what it is (a FIFO, a character device ...)."""
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISLNK, "a symbolic link")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def check_output_file(path: Path, option: str) -> None:
    """Refuse to write ``path`` unless it is a regular file or does not exist yet (its folder must exist).

    As root, writing over ``/dev/full`` or a symlink would replace the device or follow the link wherever it points.
    """
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise OutputError(f"{option} {path}: the folder {path.parent} does not exist",
                              f"create it, or choose another {option}") from None  # fmt: skip
        return
    what = kind_of(mode)
    if what is None:
        return
    target = f" to {path.readlink()}" if what == "a symbolic link" else ""
    raise OutputError(
        f"{option} {path} is {what}{target}: honestscale writes only regular files or new paths, and never "
        "replaces a device, a FIFO, a link or a folder",
        f"choose a new file name for {option}",
    )


def check_output_folder(path: Path, option: str) -> None:
    """Refuse an output folder that exists as anything but a real folder (a file, a device, a symlink)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        return
    what = kind_of(mode)
    target = f" to {path.readlink()}" if what == "a symbolic link" else ""
    raise OutputError(
        f"{path} (written beside {option}) is {what}{target}, not a folder: honestscale would replace it",
        f"move it away, or choose another {option}",
    )


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C (SIGINT) waits until the block ends, then goes to the handler that was there before (a
    KeyboardInterrupt, unless the process ignores Ctrl-C): for the few renames that swap a result in, and a fork."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    old = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if caught:
        signal.raise_signal(signal.SIGINT)  # as if pressed now


def interrupt_answered() -> None:
    """Ctrl-C has been answered (the command says what it kept and ends): later presses are ignored until the process
    ends, so that none cuts the store's close or the exit short (a press inside DuckDB's close aborts the process,
    "terminate called without an active exception", and one in Python's exit prints a traceback instead of the
    answer's exit code)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def swap_in(staged: Path, final: Path, files: list[tuple[Path, Path]]) -> None:
    """Replace the folder ``final`` by ``staged``, and each file by its partial copy (same file system), all in one
    step Ctrl-C cannot cut: the result and its files always agree, and files of an older result are gone."""
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    with interrupts_held():
        if final.is_dir():
            final.rename(old)
        staged.rename(final)
        for partial, target in files:
            partial.replace(target)
    shutil.rmtree(old, ignore_errors=True)


_SQLITE_BESIDE = ("-journal", "-wal", "-shm")  # SQLite's files beside a database while a writer has it open


@contextmanager
def sqlite_copy(path: Path, prefix: str = "honestscale-sqlite-") -> Iterator[Path]:
    """A copy of the SQLite database ``path`` with its journal or write-ahead log beside it, in a folder of its own
    (removed after): what a reader opens, so that the user's file is never touched by a read. SQLite rolls a hot
    journal back (and checkpoints a WAL) on the first open, which rewrites the database a writer left."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        copy = Path(folder) / path.name
        shutil.copyfile(path, copy)
        for tail in _SQLITE_BESIDE:
            if (beside := path.with_name(path.name + tail)).is_file():
                shutil.copyfile(beside, copy.with_name(copy.name + tail))
        yield copy
