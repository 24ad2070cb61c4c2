"""The figures' PDF copies for papers, saved by a second process while the report goes on.

Matplotlib embeds each figure's fonts as TrueType (Type 42, as journals ask) by subsetting them with fontTools, in
Python: about three quarters of the time a figure takes. The report's own PDF and HTML use the SVG of each figure,
so the copies can be written beside the drawing and the layout, on the machine's second core. A figure travels
pickled and is saved under the style it was drawn in; an error in the second process comes back from
:meth:`PaperCopies.wait`, before anything is swapped in.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from honestscale.files import interrupts_held


def _write_pdf(fig: Figure, path: Path, style: Any) -> None:
    with plt.rc_context(style):  # pdf.fonttype is read when the file is written
        fig.savefig(path, format="pdf", bbox_inches="tight")


def _save_pdf(data: bytes, path: str, style: Any) -> None:
    fig = pickle.loads(data)
    _write_pdf(fig, Path(path), style)
    plt.close(fig)


class PaperCopies:
    """Saves figures as PDF files: in a second process where there is a second core, else here and now."""

    def __init__(self, *, aside: bool = True) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._aside = (
            aside and (os.cpu_count() or 1) > 1 and "fork" in multiprocessing.get_all_start_methods()
        )

    def save(self, fig: Figure, path: Path, style: Any) -> None:
        """``fig`` as a PDF file at ``path``, written under the matplotlib ``style`` (rcParams)."""
        try:
            data = pickle.dumps(fig) if self._aside else None
        except (pickle.PicklingError, AttributeError, TypeError):  # an artist that cannot travel: saved here
            data = None
        if data is None:
            _write_pdf(fig, path, style)
            return
        if self._pool is None:
            # fork: a spawned process would import the caller's main module again (and run an unguarded script);
            # the forked one has matplotlib loaded and touches nothing but the figure and its file
            # the second process leaves Ctrl-C to this one, which drops the copies not begun (abandon)
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("fork"),
                initializer=signal.signal,
                initargs=(signal.SIGINT, signal.SIG_IGN),
            )
        # the first submit forks; Python runs its at-fork handlers (logging's lock release among them) in this
        # process after fork(), and a KeyboardInterrupt raised inside one is printed as "Exception ignored" and
        # dropped: the report would go on as if Ctrl-C had never been pressed. Held, it is raised after the fork.
        with interrupts_held():
            self._pending.append(self._pool.submit(_save_pdf, data, str(path), style))

    def wait(self) -> None:
        """Every copy written (or the first error raised, the rest abandoned); the second process ends."""
        try:
            for done in self._pending:
                done.result()
        except BaseException:
            self.abandon()
            raise
        pool, self._pool, self._pending = self._pool, None, []
        if pool is not None:
            with interrupts_held():  # quick (nothing left to do) and never cut halfway (see abandon)
                pool.shutdown()

    def abandon(self) -> None:
        """The copies not written are dropped (the report failed or Ctrl-C stopped it): the second process is killed,
        not waited for (a copy half-saved goes with the staging folder it was saved in). Ctrl-C waits until it is
        gone: a press inside the pool's shutdown once left its process waiting for work that would never come, and
        the report waiting for that process at exit, for ever."""
        pool, self._pool, self._pending = self._pool, None, []
        if pool is None:
            return
        with interrupts_held():
            kill = getattr(pool, "kill_workers", None)  # Python 3.14; before it, the pool's own process table
            if kill is not None:
                kill()
            else:
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.kill()
            pool.shutdown(wait=True, cancel_futures=True)
