"""Watching a folder: each poll lands the files that are new or changed since the last one.

One definition of what ``ingest --watch`` and ``serve --watch`` do. A poll holds the store only while it lands
files (``open_store`` is called per poll and its connection closed after), so other commands read and write the
store in between. A store held by another command past its wait, a full disk, or a file that vanished or cannot
be read never stops the watcher: what did not land is tried again next poll, and each problem is told once until
it is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from honestscale.collector._landing import IngestError
from honestscale.collector._sources import Source, discover
from honestscale.collector._summary import FileResult, Summary
from honestscale.collector.ingest import Ingester
from honestscale.errors import HonestscaleError
from honestscale.store import Connection, StoreBusy, StoreUnwritable, as_store_error

OpenStore = Callable[[], AbstractContextManager[Connection]]


@dataclass
class Poll:
    """What one poll did: the files that landed (with their results), and problems to tell (said once each)."""

    landed: list[FileResult] = field(default_factory=list)
    summary: Summary | None = None
    problems: list[HonestscaleError] = field(default_factory=list)


class Watcher:
    def __init__(
        self,
        folder: Path,
        open_store: OpenStore,
        campaign: str | None = None,
        follow_links: Sequence[Path] = (),
    ) -> None:
        if not folder.is_dir():
            raise HonestscaleError(
                f"--watch {folder}: not a folder", "give the folder the runners write into"
            )
        self.folder = folder
        self.open_store = open_store
        self.campaign = campaign
        self.follow_links = tuple(follow_links)  # links resolving under these are opened (``discover``)
        self.seen: dict[Path, tuple[int, int]] = {}
        self._said: set[str] = set()  # what could not be done, said once until it works again
        self._unreadable: set[Path] = set()  # files that could not be read, said once each

    def _changed(self, problems: list[HonestscaleError]) -> list[tuple[Source, tuple[int, int]]]:
        changed = []
        for src in discover([str(self.folder)], self.follow_links).sources:
            try:
                st = src.path.stat()
                with src.path.open("rb"):  # one unreadable file must not hold back the others
                    pass
            except FileNotFoundError:
                continue  # gone between the listing and now
            except OSError as exc:
                if src.path not in self._unreadable:
                    self._unreadable.add(src.path)
                    problems.append(
                        HonestscaleError(
                            f"cannot read {src.path}: {exc.strerror}",
                            "fix its permissions: the watcher tries again every poll",
                        )
                    )
                continue
            if self.seen.get(src.path) != (st.st_size, st.st_mtime_ns):
                changed.append((src, (st.st_size, st.st_mtime_ns)))
        return changed

    def poll(self) -> Poll:
        """Land what changed since the last poll; what could not land is tried again at the next."""
        poll = Poll()
        changed = self._changed(poll.problems)
        if not changed:
            return poll
        try:
            with self.open_store() as con:
                poll.summary = Ingester(con, campaign=self.campaign).ingest([c[0] for c in changed])
        except (StoreBusy, StoreUnwritable, IngestError) as exc:
            self._tell(exc, poll)
            return poll
        except Exception as exc:
            # a DuckDB error outside a transaction (a failed write): as_store_error knows them
            mapped = as_store_error(exc)
            if not isinstance(mapped, StoreUnwritable):
                raise
            self._tell(mapped, poll)
            return poll
        self._said.clear()
        for (src, key), result in zip(changed, poll.summary.files, strict=True):
            self.seen[src.path] = key
            if result.action != "unchanged":
                poll.landed.append(result)
        return poll

    def _tell(self, problem: HonestscaleError, poll: Poll) -> None:
        if problem.message not in self._said:
            self._said.add(problem.message)
            poll.problems.append(problem)


__all__ = ["OpenStore", "Poll", "Watcher"]
