"""``honestscale serve``: a read-only dashboard and JSON API over the store, for a centre to share by link.

One process: an ASGI application (Starlette on uvicorn) whose pages are rendered from Jinja2 templates with the
report's own section templates and figures, so every number is the analysis model's (``report --format json``)
with its verdicts; a background thread that keeps each campaign's model current; and, with ``--watch``, a thread
that lands files as ``ingest --watch`` does. How the server shares the store with the CLI: ``_state``.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from honestscale.collector.watch import Watcher
from honestscale.errors import HonestscaleError
from honestscale.lint import Suppression
from honestscale.serve._access import (
    TOKEN_ENV,
    WILDCARD_ADDRESSES,
    Access,
    allowed_hosts,
    check_token,
    is_loopback,
    machine_name,
    make_token,
)
from honestscale.serve._app import Dashboard
from honestscale.serve._state import Busy, State
from honestscale.store import open_store
from honestscale.store import shown as masked


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


def check(store: Path, shared: bool, token: str | None, watch: Path | None, certfile: Path | None = None,
          keyfile: Path | None = None) -> None:  # fmt: skip
    """Refuse, before anything starts, a weak token (``shared``: one serve did not make), a certificate that does
    not load and a store that cannot be read."""
    if token is not None:
        check_token(token, shared)
    if keyfile is not None and certfile is None:
        raise HonestscaleError("--keyfile without --certfile", "give the certificate with --certfile too")
    if certfile is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise HonestscaleError(f"cannot serve TLS with --certfile {certfile}"
                                   + (f" --keyfile {keyfile}" if keyfile else "") + f": {exc}",
                                   "give a PEM certificate (chain) and its unencrypted private key") from None  # fmt: skip
    if watch is not None and not watch.is_dir():
        raise HonestscaleError(f"--watch {watch}: not a folder", "give the folder the runners write into")
    if watch is not None and not store.exists():
        open_store(store, read_only=False).close()  # the watcher lands into a new store: create it now
    open_store(
        store, read_only=True, wait_s=30.0
    ).close()  # a missing, damaged or future store: the CLI's words


def serve(store: Path, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          watch: Path | None = None, campaign: str | None = None, interval: float = 2.0,
          suppressions: list[Suppression] | None = None, allow_hosts: Sequence[str] = (),
          certfile: Path | None = None, keyfile: Path | None = None,
          forwarded_allow_ips: str | None = None, path_root: Path | None = None,
          claims: Sequence[Path] = ()) -> None:  # fmt: skip
    """Serve until interrupted (Ctrl-C or SIGTERM). Pages show event files relative to ``path_root`` (default:
    the store's folder).

    Off loopback, or through a proxy named by ``allow_hosts``, without a token: one is made for this run and its
    link printed. ``certfile``/``keyfile``: TLS (uvicorn's own); ``forwarded_allow_ips``: the proxies whose
    ``X-Forwarded-Proto``/``-For`` uvicorn believes (its default: 127.0.0.1 and ::1, or ``FORWARDED_ALLOW_IPS``).
    ``claims``: the paper's claims files the Claims page judges (read here, before the server listens: a malformed
    one is refused with its line)."""
    import uvicorn

    # a token is needed where others reach the server: beyond loopback, or through a proxy's name (--allow-host)
    shared = not is_loopback(host) or bool(allow_hosts)
    check(store, shared, token, watch, certfile, keyfile)
    from honestscale.claims import load

    claims_files = [load(path) for path in claims]
    hosts = allowed_hosts(host, allow_hosts)
    made = token is None and shared
    if made:
        token = make_token()
    sock = _bind(host, port)
    workdir = Path(tempfile.mkdtemp(prefix="honestscale-serve-"))
    state = State(store, workdir, suppressions, path_root)
    dashboard = Dashboard(state, Access(token, hosts), str(watch) if watch else None, claims_files)
    threads = [threading.Thread(target=_keep_warm, args=(state,), name="warm", daemon=True)]
    if watch is not None:
        watcher = Watcher(watch, lambda: state.write(wait_s=30.0), campaign)
        threads.append(
            threading.Thread(target=_watch, args=(state, watcher, interval), name="watch", daemon=True)
        )
    bound = sock.getsockname()
    scheme = "https" if certfile else "http"
    url = f"{scheme}://{'[' + host + ']' if ':' in host else host}:{bound[1]}/"
    print(f"honestscale serve: {url} (store {masked(str(store))}" + (f", watching {watch}" if watch else "")
          + "); Ctrl-C to stop", file=sys.stderr, flush=True)  # fmt: skip
    if made:
        if is_loopback(host):  # through the proxy named by --allow-host: its address, as the browser sees it
            proxy = next((h for h in allow_hosts if not h.startswith("*")), "PROXY")
            link = f"https://{proxy}/?token={token} (the proxy's address)"
            why = "--allow-host names a proxy"
        else:
            name = (
                machine_name() if host in WILDCARD_ADDRESSES else ("[" + host + "]" if ":" in host else host)
            )
            link, why = f"{scheme}://{name}:{bound[1]}/?token={token}", "off loopback"
        print(f"honestscale serve: no --token given, {why}: made one for this run; open this link once (the browser "
              f"keeps a session, the address loses the token): {link} (API clients: 'Authorization: Bearer "
              f"{token}')", file=sys.stderr, flush=True)  # fmt: skip
    if not is_loopback(host) and certfile is None:
        print("honestscale serve: plain HTTP beyond loopback: the token and every page cross the network "
              "unencrypted; give --certfile/--keyfile, or serve behind a TLS proxy (docs/serve.md)",
              file=sys.stderr, flush=True)  # fmt: skip
    try:
        for t in threads:
            t.start()
        tls: dict[str, Any] = (
            {"ssl_certfile": str(certfile), "ssl_keyfile": str(keyfile) if keyfile else None}
            if certfile
            else {}
        )
        config = uvicorn.Config(dashboard.app(), log_level="warning", access_log=False, lifespan="off",
                                forwarded_allow_ips=forwarded_allow_ips, **tls)  # fmt: skip
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        state.stop.set()
        for t in threads:
            t.join(timeout=30)
        sock.close()
        shutil.rmtree(workdir, ignore_errors=True)


__all__ = ["TOKEN_ENV", "Busy", "Dashboard", "State", "check", "make_token", "serve"]
