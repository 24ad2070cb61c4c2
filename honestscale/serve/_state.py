"""What the server knows of the store, and how it reads it without getting in anyone's way.

The store is opened read-only for each read and closed right after (DuckDB lets one process write a file, or many
read it, never both): between reads the CLI's ``ingest``, ``report`` and ``lint`` open it as if the server were
not there, and while one of them writes, the server answers from what it read last and says so.

Everything built from the store (the overview, each campaign's analysis model and its figures) is cached under a
fingerprint of what it was built from: the store file's state for the overview, and for a campaign its runs, their
events and its spec. A campaign page therefore costs its model's build once per change, not per request. A
background thread keeps the overview and every campaign's model up to date, newest campaign first, so pages
rarely wait; what is not built yet is said to be ("judging ...").
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from honestscale import judged
from honestscale import report as reporting
from honestscale.lint import LintResult, Suppression
from honestscale.report import Model, Outputs, Plan
from honestscale.store import (
    Connection,
    NoSuchCampaign,
    StoreBusy,
    StoreError,
    as_store_error,
    is_lake,
    open_store,
    queries,
)
from honestscale.store import dashboard as reads

T = TypeVar("T")
READ_WAIT_S = 1.0  # how long a page waits for a writer before it answers from what it read last


class Busy(Exception):
    """The store is being written and nothing was read before: the page asks to be loaded again."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass
class Overview:
    rows: list[dict[str, Any]]
    read_at: float
    stamp: tuple[Any, ...]


@dataclass
class Campaign:
    """A campaign's analysis model (the numbers of ``report --format json``), its lint result and its page."""

    name: str
    fingerprint: tuple[Any, ...]
    model: Model
    result: LintResult
    judged: judged.Judged  # the view and the lint the model was built from (a run page's verdicts and series)
    read_s: float  # store queries (the view)
    build_s: float  # lint + model
    page: Outputs | None = None  # figures and paper exports, drawn when the browser first asks for one
    contents: Plan | None = None  # what the page holds, by name (no figure drawn): the page is shown from it
    draw_s: float = 0.0
    pdf: Path | None = None
    folder: Path = field(default_factory=Path)
    lock: threading.Lock = field(
        default_factory=threading.Lock, repr=False
    )  # one drawing of its page at a time

    @property
    def verdicts(self) -> dict[str, int]:
        findings = [f for f in self.model.lint["findings"] if not f["suppressed"]]
        return {
            "fail": sum(f["outcome"] == "fail" for f in findings),
            "cannot_verify": sum(f["outcome"] == "cannot_verify" for f in findings),
            "errors": int(self.model.lint["errors"]),
            "suppressed": sum(bool(f["suppressed"]) for f in self.model.lint["findings"]),
        }


def fingerprint_of(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a campaign's model is built from, as its overview row says: changes whenever a run of it lands, grows,
    ends or is superseded, or its spec changes."""
    return (row["landed"], row["events"], row["last_event"], row["superseded"], row["failed"], row["succeeded"],
            row["spec_hash"])  # fmt: skip


class State:
    def __init__(self, store: Path, workdir: Path, suppressions: list[Suppression] | None = None,
                 path_root: Path | None = None) -> None:  # fmt: skip
        self.store = store
        # a DuckLake store: many writers commit while the pages read; one read-only session, kept open, sees each
        # commit in its next query (no file lock to share), and its latest snapshot id is the stamp
        self.lake = is_lake(str(store))
        self._lake_con: Connection | None = None
        # what the pages show event files and command lines relative to: --path-root, else the store's folder
        self.path_root = (path_root or (Path.cwd() if is_lake(str(store)) else store.parent)).absolute()
        self.workdir = workdir
        self.suppressions = suppressions or []
        # DuckDB refuses a read-only and a read-write connection to one file in one process: the watcher's writes
        # and the pages' reads take turns
        self.open_lock = threading.Lock()
        self.draw_lock = threading.Lock()  # matplotlib's pyplot is not thread-safe
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}
        self._overview: Overview | None = None
        self._campaigns: dict[str, Campaign] = {}
        self._no_campaign: tuple[tuple[Any, ...], judged.Judged] | None = None
        self.busy: str | None = None  # why the last read could not be made (a writer holds the store)
        self.stop = threading.Event()

    # -- reading the store ------------------------------------------------------------------------------------
    def stamp(self) -> tuple[Any, ...]:
        """Changes whenever a writer commits: the store file and its write-ahead log, size and time (a DuckLake
        store: its latest snapshot)."""
        if self.lake:
            try:
                return (self.read(queries.lake_snapshot),)
            except Busy:  # a long read holds the session: what was read last stands until it ends
                return self._overview.stamp if self._overview is not None else ("busy",)
        out: list[Any] = []
        for path in (self.store, self.store.with_name(self.store.name + ".wal")):
            try:
                st = path.stat()
                out += [st.st_size, st.st_mtime_ns]
            except FileNotFoundError:
                out += [None, None]
        return tuple(out)

    def read(self, fn: Callable[[Connection], T], wait_s: float = READ_WAIT_S) -> T:
        """``fn`` on a read-only connection held only for it; Busy when a writer holds the store past ``wait_s``."""
        if not self.open_lock.acquire(timeout=wait_s):
            raise Busy("this server's --watch is landing files in the store, or a campaign is being read")
        try:
            if self.lake:  # one read at a time on the kept session (concurrent cursors crash DuckLake 1.4.4)
                return self._read_lake(fn)
            try:
                con = open_store(self.store, read_only=True, wait_s=wait_s)
            except StoreBusy as exc:
                raise Busy(exc.message) from None
            try:
                return fn(con)
            finally:
                con.close()
        finally:
            self.open_lock.release()

    def _read_lake(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` on the kept read-only session of a DuckLake store (opened again after a failure)."""
        if self._lake_con is None:
            self._lake_con = open_store(self.store, read_only=True)
        try:
            return fn(self._lake_con)
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._lake_con.close()
            self._lake_con = None
            failed = as_store_error(exc)  # the catalog gone: the store's fault named, never a bug of the page
            if failed is not None and not isinstance(exc, StoreError):
                raise failed from None
            raise

    @contextlib.contextmanager
    def write(self, wait_s: float) -> Iterator[Connection]:
        """The store opened read-write (the watcher's ingest), the pages' reads waiting their turn."""
        with self.open_lock:
            con = open_store(self.store, read_only=False, wait_s=wait_s)
            try:
                yield con
            finally:
                con.close()

    # -- the overview -----------------------------------------------------------------------------------------
    def overview(self) -> Overview:
        """The campaigns and their runs as of the last committed write (or the last read, while one is under way)."""
        stamp = self.stamp()
        current = self._overview
        if current is not None and current.stamp == stamp:
            return current
        try:
            rows = self.read(lambda con: reads.campaign_overview(con, time.time()).to_dicts())
        except Busy as exc:
            self.busy = exc.why
            if current is None:
                raise
            return current
        self.busy = None
        fresh = Overview(rows, time.time(), stamp)
        self._overview = fresh
        return fresh

    def fingerprint(self, name: str) -> tuple[Any, ...] | None:
        row = next((r for r in self.overview().rows if r["campaign"] == name), None)
        return None if row is None else fingerprint_of(row)

    # -- campaigns --------------------------------------------------------------------------------------------
    def cached(self, name: str) -> Campaign | None:
        return self._campaigns.get(name)

    def fresh(self, row: dict[str, Any]) -> bool:
        """Whether the campaign of this overview row has a model built from what the row describes."""
        entry = self._campaigns.get(row["campaign"])
        return entry is not None and entry.fingerprint == fingerprint_of(row)

    def campaign(self, name: str) -> Campaign:
        """The campaign's model, built again only when its runs changed; StoreError for a campaign not in the
        store (with the names it may have meant)."""
        fingerprint = self.fingerprint(name)
        if fingerprint is None:
            self.read(lambda con: queries.check_campaign(con, name))  # names the close ones
            raise NoSuchCampaign(f"no campaign {name!r} in the store", "see the campaigns page")
        with self._lock:
            building = self._building.setdefault(name, threading.Lock())
        with building:
            entry = self._campaigns.get(name)
            if entry is not None and entry.fingerprint == fingerprint:
                return entry
            t0 = time.perf_counter()
            try:
                j = self.read(lambda con: judged.read(con, name, suppressions=self.suppressions))
            except Busy:
                if entry is not None:
                    return entry
                raise
            t1 = time.perf_counter()
            model, result = reporting.analyse(j.view, name, path_root=self.path_root, result=j.lint)
            t2 = time.perf_counter()
            folder = self.workdir / hashlib.sha256(name.encode()).hexdigest()[:16]
            entry = Campaign(name, fingerprint, model, result, j, t1 - t0, t2 - t1, folder=folder)
            self._campaigns[name] = entry
            return entry

    def no_campaign(self) -> judged.Judged:
        """The whole store judged as ``honestscale lint`` judges it (a run page of a run of no campaign: its
        verdicts are those naming it), read again only when a writer committed since."""
        stamp = self.stamp()
        if self._no_campaign is None or self._no_campaign[0] != stamp:
            j = self.read(lambda con: judged.read(con, None, suppressions=self.suppressions))
            self._no_campaign = (stamp, j)
        return self._no_campaign[1]

    def contents(self, entry: Campaign) -> Plan:
        """What the campaign's page holds (its comparisons, figures and exports by name), decided without drawing:
        the page is shown from it at once and its figures are drawn after it (``page``), never on its request."""
        if entry.contents is None:
            entry.contents = reporting.plan(entry.model)
        return entry.contents

    def page(self, entry: Campaign) -> Outputs:
        """The campaign's figures and paper exports (CSV, LaTeX, SVG, PDF figures), drawn once per model, when the
        browser first asks for one of them."""
        with entry.lock:
            if entry.page is None:
                t0 = time.perf_counter()
                entry.folder.mkdir(parents=True, exist_ok=True)
                with self.draw_lock:
                    entry.page = reporting.render(entry.model, None, entry.folder / "report.html",
                                                  entry.folder / "files")  # fmt: skip
                entry.draw_s = time.perf_counter() - t0
            return entry.page

    def pdf(self, entry: Campaign) -> Path:
        """The campaign's PDF report, printed on first request (WeasyPrint takes seconds)."""
        with entry.lock:
            if entry.pdf is None:
                target = entry.folder / "report.pdf"
                entry.folder.mkdir(parents=True, exist_ok=True)
                with self.draw_lock:
                    entry.page = reporting.render(entry.model, target, entry.folder / "report.html",
                                                  entry.folder / "files")  # fmt: skip
                entry.pdf = target
            return entry.pdf

    def warm(self) -> None:
        """Judge what is missing or stale, newest campaign first (the background thread's one pass)."""
        try:
            rows = self.overview().rows
        except (Busy, StoreError):
            return
        for row in rows:
            if self.stop.is_set():
                return
            if row["campaign"] and row["landed"] and not self.fresh(row):
                with contextlib.suppress(Busy, StoreError):
                    self.campaign(row["campaign"])  # its figures are drawn when its page is first opened


__all__ = ["Busy", "Campaign", "Overview", "State"]
