"""A throwaway PostgreSQL cluster for the DuckLake store's tests: Debian's PostgreSQL (``initdb``, ``pg_ctl`` as the
``postgres`` user), on loopback and a free port, its socket and data in a temporary folder, torn down after.

Without PostgreSQL the tests that need it skip with the reason, except in CI, where ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.tools import require


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    bin: Path
    data: Path | None = None  # the cluster's folder (stop and start it again: the catalog going away)
    options: str = ""

    def pg_ctl(self, *args: str) -> None:
        """``pg_ctl stop -m fast`` / ``start -w`` on this cluster, as the postgres user."""
        assert self.data is not None
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin / "pg_ctl"), "-D", str(self.data), "-o",
                        self.options, "-l", str(self.data.parent / "log"), *args], check=True, capture_output=True,
                       timeout=120)  # fmt: skip

    def create_database(self, name: str) -> str:
        """A new database; returns the DuckLake store address of a catalog in it."""
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bin / "createdb"), "-h", self.host, "-p", str(self.port), name],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        return f"ducklake:postgres:dbname={name} host={self.host} port={self.port} user=postgres"

    def sql(self, database: str, *statements: str) -> None:
        """Statements run as the postgres superuser in ``database`` (roles, grants)."""
        for statement in statements:
            subprocess.run(
                ["runuser", "-u", "postgres", "--", str(self.bin / "psql"), "-h", self.host, "-p", str(self.port), "-d",
                 database, "-v", "ON_ERROR_STOP=1", "-qAtc", statement], check=True, capture_output=True, timeout=60,
            )  # fmt: skip


def _bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster() -> Iterator[Postgres]:
    """Start a cluster in a new folder of /tmp owned by the postgres user (pytest's own temporary folders are root's
    alone), yield it, stop it and remove the folder."""
    bin_ = _bin()
    require(shutil.which("runuser") and os.geteuid() == 0, "root, and runuser", "run the tests as root")
    require(bin_, "Debian's PostgreSQL (initdb, pg_ctl)", "apt-get install postgresql")
    assert bin_ is not None
    folder = Path(tempfile.mkdtemp(prefix="honestscale-pg-"))
    shutil.chown(folder, "postgres")
    data, port = folder / "data", _free_port()
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, str(bin_ / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
    subprocess.run([*as_pg, str(bin_ / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w",
                    "start"], check=True, capture_output=True, timeout=120)  # fmt: skip
    try:
        yield Postgres("127.0.0.1", port, bin_, data, options)
    finally:
        subprocess.run([*as_pg, str(bin_ / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
