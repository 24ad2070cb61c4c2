"""Ctrl-C while DuckDB 1.4 runs a query: its Python client takes the SIGINT and drops it (the query runs to its end,
and no KeyboardInterrupt follows), which DuckDB 2.0 no longer does. While a command holds the store, SIGINT is
blocked in every thread and a waiter thread takes it: it interrupts the store's running query and raises
KeyboardInterrupt in the main thread, so Ctrl-C stops the command (exit 130, what committed is kept) as before."""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb


class Interruptible:
    """The connection the waiter interrupts (set once the store is open)."""

    def __init__(self) -> None:
        self.con: duckdb.DuckDBPyConnection | None = None


@contextmanager
def ctrl_c_interrupts() -> Iterator[Interruptible]:
    """Enter before the store is opened (DuckDB's threads, made then, inherit the blocked signal), set ``.con``."""
    target = Interruptible()
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield target
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if signal.SIGINT in previous:  # already blocked by an outer holder: it waits for the signal
        yield target
        return
    done = threading.Event()

    def wait() -> None:
        while not done.is_set():
            if signal.sigtimedwait({signal.SIGINT}, 0.1) is None:
                continue
            if target.con is not None:
                target.con.interrupt()
            _thread.interrupt_main()
            return

    waiter = threading.Thread(target=wait, name="honestscale-ctrl-c", daemon=True)
    waiter.start()
    try:
        yield target
    finally:
        done.set()
        waiter.join()
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
