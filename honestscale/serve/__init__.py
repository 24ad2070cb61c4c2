"""``honestscale serve``: a read-only dashboard and JSON API over the store, for a centre to share by link.

One process: an ASGI application (Starlette on uvicorn) whose pages are rendered from Jinja2 templates with the
report's own section templates and figures, so every number is the analysis model's (``report --format json``)
with its verdicts; a background thread that keeps each campaign's model current; and, with ``--watch``, a thread
that lands files as ``ingest --watch`` does. How the server shares the store with the CLI: ``_state``.
"""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from honestscale.collector.watch import Watcher
from honestscale.errors import HonestscaleError
from honestscale.lint import Suppression
from honestscale.serve._app import Dashboard, is_loopback
from honestscale.serve._state import Busy, State
from honestscale.store import open_store

TOKEN_ENV = "HONESTSCALE_TOKEN"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise HonestscaleError(f"cannot listen on {host}:{port}: {exc.strerror}",
                               "pass another --port (0 picks a free one), or stop what uses it") from None  # fmt: skip
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _keep_warm(state: State) -> None:
    while not state.stop.wait(1.0):
        try:
            state.warm()
        except Exception as exc:  # a page will show the reason; the loop must go on
            print(f"honestscale serve: could not judge a campaign: {exc}", file=sys.stderr)


def _watch(state: State, watcher: Watcher, interval: float) -> None:
    while not state.stop.is_set():
        try:
            poll = watcher.poll()
        except Exception as exc:  # the watcher must outlive one bad poll: what did not land is tried again
            print(
                f"{time.strftime('%H:%M:%S')} not landed yet: {exc}; tried again next poll", file=sys.stderr
            )
            state.stop.wait(interval)
            continue
        for problem in poll.problems:
            print(
                f"{time.strftime('%H:%M:%S')} not landed yet: {problem.message}; {problem.fix}",
                file=sys.stderr,
            )
        if poll.summary is not None and poll.summary.changed:
            print(f"{time.strftime('%H:%M:%S')} {poll.summary.line()}", file=sys.stderr)
        state.stop.wait(interval)


def check(store: Path, host: str, token: str | None, watch: Path | None) -> None:
    """Refuse, before anything starts, an address beyond loopback without a token and a store that cannot be read."""
    if not is_loopback(host) and not token:
        raise HonestscaleError(
            f"--host {host} is reachable from other machines: the dashboard needs a token there",
            f"pass --token SECRET or set {TOKEN_ENV} (then open http://{host}:PORT/?token=SECRET once), "
            "or keep the default --host 127.0.0.1",
        )
    if watch is not None and not watch.is_dir():
        raise HonestscaleError(f"--watch {watch}: not a folder", "give the folder the runners write into")
    if watch is not None and not store.exists():
        open_store(store, read_only=False).close()  # the watcher lands into a new store: create it now
    open_store(
        store, read_only=True, wait_s=30.0
    ).close()  # a missing, damaged or future store: the CLI's words


def serve(store: Path, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          watch: Path | None = None, campaign: str | None = None, interval: float = 2.0,
          suppressions: list[Suppression] | None = None) -> None:  # fmt: skip
    """Serve until interrupted (Ctrl-C or SIGTERM)."""
    import uvicorn

    check(store, host, token, watch)
    sock = _bind(host, port)
    workdir = Path(tempfile.mkdtemp(prefix="honestscale-serve-"))
    state = State(store, workdir, suppressions)
    dashboard = Dashboard(state, token, str(watch) if watch else None)
    threads = [threading.Thread(target=_keep_warm, args=(state,), name="warm", daemon=True)]
    if watch is not None:
        watcher = Watcher(watch, lambda: state.write(wait_s=30.0), campaign)
        threads.append(
            threading.Thread(target=_watch, args=(state, watcher, interval), name="watch", daemon=True)
        )
    bound = sock.getsockname()
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound[1]}/"
    print(f"honestscale serve: {url} (store {store}" + (f", watching {watch}" if watch else "")
          + "); Ctrl-C to stop", file=sys.stderr, flush=True)  # fmt: skip
    try:
        for t in threads:
            t.start()
        config = uvicorn.Config(dashboard.app(), log_level="warning", access_log=False, lifespan="off")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        state.stop.set()
        for t in threads:
            t.join(timeout=30)
        sock.close()
        shutil.rmtree(workdir, ignore_errors=True)


__all__ = ["TOKEN_ENV", "Busy", "Dashboard", "State", "check", "serve"]
