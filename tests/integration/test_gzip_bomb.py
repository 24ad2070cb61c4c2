"""A gzip bomb is refused like the other files ingest will not read: named, nothing landed, exit 3, and the memory it
costs bounded by what the ratio allows, never by what it would expand to."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLE, cli, counts

MEMBER = (
    10 << 20
)  # decompressed bytes per gzip member: a multi-member file is cheap to make and huge to expand
EVENT = (EXAMPLE / "digits-mlp-1w-r0-20261121T085353" / "events-rank0.jsonl").read_bytes().splitlines()[
    0
] + b"\n"


def _bomb(path: Path, content: bytes, members: int) -> Path:
    """``members`` gzip members of ``content`` repeated to MEMBER bytes (compressed once, written ``members`` times)."""
    one = gzip.compress(content * (MEMBER // len(content)), 9)
    path.write_bytes(one * members)
    return path


def _peak_rss_mib(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run ``honestscale`` in a process of its own and read its peak resident memory (ru_maxrss of its children,
    measured in a fresh parent, so no other test's process counts)."""
    probe = (
        "import json, resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(json.dumps([p.returncode, p.stdout + p.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n"
    )
    full = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"} | {
        "COLUMNS": "200",
        **(env or {}),
    }
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "honestscale", *map(str, args)],
                         capture_output=True, text=True, env=full, timeout=300, check=True)  # fmt: skip
    code, text, kib = json.loads(out.stdout)
    return int(code), str(text), kib / 1024


def test_a_gzip_bomb_is_named_refused_and_costs_bounded_memory(tmp_path: Path, store: Path) -> None:
    """500 KB of gzip that expands to 500 MB of zeros (it took 1.16 GB and exited 0, "read when the file grows"):
    refused once it holds 100 times its size, named with the setting that raises the bound, nothing landed,
    exit 3; the ingest's peak memory stays far below the 500 MB it would expand to."""
    bomb = _bomb(tmp_path / "events-rank0.jsonl.gz", b"\0", 50)
    assert bomb.stat().st_size < 600_000
    code, text, peak = _peak_rss_mib("ingest", bomb, "--store", store)
    assert code == 3, text
    assert f"{bomb}: " in text and "gzip bomb" in text and "HONESTSCALE_MAX_GZIP_RATIO" in text, text
    assert "grows" not in text, text
    assert counts(store)["events"] == 0 and counts(store)["ingested_files"] == 0
    assert peak < 350, f"{peak:.0f} MiB"  # 186 MiB here, of which about 100 the interpreter and its libraries


def test_repeated_valid_lines_are_a_bomb_too_and_the_bound_can_be_raised(tmp_path: Path, store: Path) -> None:
    bomb = _bomb(tmp_path / "events-rank0.jsonl.gz", EVENT, 2)  # 20 MiB of one event line, ~1,000x compressed
    refused = cli("ingest", bomb, "--store", store)
    assert refused.returncode == 3 and "gzip bomb" in refused.stderr, refused.stderr
    assert counts(store)["events"] == 0
    # a real file of this shape: raise the bound and it lands (its repeated lines are duplicates of the first)
    raised = cli("ingest", bomb, "--store", store, env={"HONESTSCALE_MAX_GZIP_RATIO": "5000"})
    assert raised.returncode == 0, raised.stderr
    assert counts(store)["events"] == 1 and "duplicate events skipped" in raised.stdout


def test_real_gzipped_events_land_and_a_long_last_line_of_a_gz_is_quarantined(
    tmp_path: Path, store: Path
) -> None:
    folder = EXAMPLE / "digits-mlp-2w-r0-20261121T085353"
    for rank in (0, 1):  # the example's own events, gzipped: 6x, far below the bound
        raw = (folder / f"events-rank{rank}.jsonl").read_bytes()
        (tmp_path / f"events-rank{rank}.jsonl.gz").write_bytes(gzip.compress(raw))
    landed = cli("ingest", tmp_path, "--store", store)
    assert landed.returncode == 0, landed.stderr
    assert counts(store)["events"] == sum(len((folder / f"events-rank{r}.jsonl").read_bytes().splitlines())
                                          for r in (0, 1))  # fmt: skip
    # zeros let through by a raised bound: one last line without a line end, in a file that does not grow
    (tmp_path / "zeros").mkdir()
    zeros = _bomb(tmp_path / "zeros" / "events-rank0.jsonl.gz", b"\0", 1)
    got = cli("ingest", zeros, "--store", store, env={"HONESTSCALE_MAX_GZIP_RATIO": "5000"})
    assert got.returncode == 3 and "grows" not in got.stderr, got.stderr
    (line,) = json.loads(cli("quarantine", "--store", store, "-f", "json").stdout)
    assert line["file"] == str(zeros) and "does not grow" in line["reason"] and line["raw_length"] == MEMBER
