"""A text corpus on every machine without a download: the CPython standard library's own sources, as bytes.

Why this one: every machine that runs honestscale has a Python, and with it a few megabytes of real, varied,
human-written text (code, docstrings, comments) under a licence (PSF) that allows it; nothing is fetched. Bytes
are the tokens (a vocabulary of 256): no tokenizer to download or train, and a loss in nats per byte that any
reader can compare. The files are taken in sorted order of their path below the standard library, tests and
third-party packages left out; each file goes whole to one split by a hash of its path (validation 1 in 20, test 1
in 20), so no file leaks between splits, until the train split holds ``max_bytes`` and the two others a
eighteenth of it each (a full split takes no more files). The same Python version
gives the same corpus; its SHA-256 is recorded with the run.

Standard library only at import time; NumPy and torch inside the functions.
"""

from __future__ import annotations

import hashlib
import sys
import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "lib2to3"}


class CorpusError(ValueError):
    pass


@dataclass
class Corpus:
    """The three splits as byte arrays (NumPy uint8), and where they came from."""

    name: str
    path: str
    train: Any
    validation: Any
    test: Any
    files: int
    sha256: str

    def windows(self, split: str, seq_len: int) -> int:
        """Sequences of ``seq_len`` tokens (and the next one as the last target) in ``split``."""
        data = getattr(self, split)
        return max(0, (len(data) - 1) // seq_len)


def _split_of(rel: str) -> str:
    bucket = zlib.crc32(rel.encode()) % 20
    return "validation" if bucket == 0 else "test" if bucket == 1 else "train"


def stdlib(max_bytes: int, root: Path | None = None) -> Corpus:
    """The standard library's ``.py`` sources below ``root`` (this interpreter's), in whole files: each split takes
    files until it holds ``max_bytes`` (train) or an eighteenth of it (validation, test), the last file included
    whole, so the train split can exceed ``max_bytes`` by up to one file."""
    import numpy as np

    base = root or Path(sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise CorpusError(f"the Python standard library is not at {base}: pass --data-path to its folder")
    parts: dict[str, list[bytes]] = {"train": [], "validation": [], "test": []}
    size = {"train": 0, "validation": 0, "test": 0}
    digest = hashlib.sha256()
    files = 0
    quota = {"train": max_bytes, "validation": max(1, max_bytes // 18), "test": max(1, max_bytes // 18)}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).as_posix()
        if SKIP_DIRS.intersection(path.relative_to(base).parts[:-1]):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        split = _split_of(rel)
        if size[split] >= quota[split]:
            if all(size[k] >= quota[k] for k in size):
                break
            continue  # this split is full: the others are still filling
        parts[split].append(data + b"\n\n")
        size[split] += len(data) + 2
        digest.update(rel.encode() + b"\0" + data)
        files += 1
    if size["train"] == 0 or size["validation"] == 0 or size["test"] == 0:
        raise CorpusError(f"{base} holds too little Python source for three splits ({files} files read)")
    arrays = {k: np.frombuffer(b"".join(v), dtype=np.uint8) for k, v in parts.items()}
    version = ".".join(map(str, sys.version_info[:2]))
    return Corpus(name=f"cpython-{version}-stdlib", path=str(base), files=files, sha256=digest.hexdigest(),
                  **arrays)  # fmt: skip


def sequences(data: Any, seq_len: int, limit: int | None = None) -> tuple[Any, Any]:
    """Non-overlapping windows of ``data``: inputs (N, seq_len) and targets shifted by one, as int64 tensors."""
    import numpy as np
    import torch

    n = (len(data) - 1) // seq_len
    if limit is not None:
        n = min(n, limit)
    idx = np.arange(n)[:, None] * seq_len + np.arange(seq_len)[None, :]
    x = torch.from_numpy(data[idx].astype(np.int64))
    y = torch.from_numpy(data[idx + 1].astype(np.int64))
    return x, y
