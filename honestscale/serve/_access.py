"""Who may read the dashboard: the names it answers for, the token, and the session cookie the token buys.

* **Host allow-list** (against DNS rebinding: a web page whose name is made to resolve to 127.0.0.1 reaches the
  server with its own name in ``Host``): loopback names, the ``--host`` address itself and, when the server listens
  on every address, this machine's names; ``--allow-host`` adds a proxy's name. Starlette's
  ``TrustedHostMiddleware`` decides (its patterns: an exact name or ``*.example.org``); a request for any other
  name is answered 421 (no ``Host`` at all: 400) with the option that fixes it.
* **Token**: at least 128 bits (a weaker one is refused at start). Off loopback (or with ``--allow-host``) only a
  token serve made is taken (``make_token``: ``hs_``, 256 random bits from :func:`secrets.token_urlsafe`, and a
  checksum of them that ``made_here`` checks), since a chosen one can pass any test of length and alphabet and
  still be guessable; without one, ``serve`` makes one and prints its link, and ``serve --make-token`` prints one
  to keep. Compared in constant time, as SHA-256 digests so that not even its length shows in the time taken.
* **Session**: ``?token=`` is exchanged once for a cookie that holds no token (an issue time, a nonce and their
  HMAC-SHA256 under a key made at start-up: a restart ends every session) and the browser is sent on to the same
  address without the token, so it stays in neither the address bar nor the history. ``HttpOnly``,
  ``SameSite=Strict``; over TLS ``Secure`` and named ``__Host-...`` (bound to this host, path ``/``).
  ``Authorization: Bearer TOKEN`` works for API clients.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import html
import ipaddress
import math
import secrets
import socket
import string
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from honestscale.errors import HonestscaleError

TOKEN_ENV = "HONESTSCALE_TOKEN"
MIN_TOKEN_BITS = 128
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")
SESSION_COOKIE = "honestscale_session"
SECURE_SESSION_COOKIE = "__Host-honestscale_session"  # browsers accept it only with Secure, Path=/, no Domain
SESSION_MAX_AGE_S = 7 * 24 * 3600
MAKE_TOKEN = "honestscale serve --make-token"
# a token serve made: ``hs_`` + 43 url-safe random characters (256 bits) + ``_`` + 8 characters of their SHA-256:
# off loopback only such a token is taken, because a chosen one can pass any test of length and alphabet
# ("correcthorsebatterystaple", "abcdefgh" x 4) and still be guessable
TOKEN_PREFIX, _BODY, _SUM = "hs_", 43, 8
_BASE64 = set(string.ascii_letters + string.digits + "+/=-_")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _name(host: str) -> str:
    """A host as it appears in a ``Host`` header, without its port: lower case, an IPv6 address in brackets."""
    host = host.strip().lower()
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    return f"[{address}]" if address.version == 6 else str(address)


def allowed_hosts(host: str, allow: Sequence[str] = ()) -> list[str]:
    """The ``Host`` names the server answers for, listening on ``host``, plus ``--allow-host``'s."""
    names = list(LOOPBACK_NAMES)
    if host in WILDCARD_ADDRESSES:  # every address: this machine's names and addresses too
        machine = {socket.gethostname(), socket.getfqdn()}
        with contextlib.suppress(OSError):
            machine |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
        names += sorted(machine)
    else:
        names.append(host)
    for pattern in allow:
        if pattern.strip() in ("*", ""):
            raise HonestscaleError(
                f"--allow-host {pattern!r} would answer any name: a web page that makes its own name resolve "
                "to this machine (DNS rebinding) could then read the dashboard",
                "name the proxy's host name (e.g. --allow-host dash.example.org, or --allow-host '*.example.org')",
            )
        if "*" in pattern[1:] or (pattern.startswith("*") and not pattern.startswith("*.")):
            raise HonestscaleError(
                f"--allow-host {pattern!r}: a wildcard must be the whole first label",
                "write it as '*.example.org', or give the exact name",
            )
        if "/" in pattern:
            raise HonestscaleError(
                f"--allow-host {pattern!r} is not a host name",
                "give the name only, as a browser sends it: dash.example.org, not a URL",
            )
        name = pattern.strip()
        if name.count(":") == 1 and not name.startswith("["):  # name:port: the port does not matter
            name = name.split(":")[0]
        names.append(name)
    return list(dict.fromkeys(_name(n) for n in names))


def token_bits(token: str) -> float:
    """An upper bound of the token's entropy: its length times the bits per character of its alphabet."""
    if token.isdigit():
        alphabet = 10
    elif all(c in string.hexdigits for c in token):
        alphabet = 16
    elif all(c in _BASE64 for c in token):
        alphabet = 64
    else:
        alphabet = 94  # printable ASCII but space
    return len(token) * math.log2(alphabet)


def _sum(body: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()[:6]).decode()


def made_here(token: str) -> bool:
    """A token ``make_token`` made: its prefix, its length, and its last part the checksum of its random part."""
    body = token[len(TOKEN_PREFIX) : len(TOKEN_PREFIX) + _BODY]
    return (
        len(token) == len(TOKEN_PREFIX) + _BODY + 1 + _SUM
        and token.startswith(TOKEN_PREFIX)
        and token[-_SUM - 1] == "_"
        and hmac.compare_digest(token[-_SUM:], _sum(body))
    )


def check_token(token: str, shared: bool = False) -> None:
    """Refuse a token weaker than 128 bits, or one a URL or a header would mangle; where others reach the server
    (``shared``: off loopback, or through a proxy's name), one serve did not make (``made_here``)."""
    fix = (
        f"make one with `{MAKE_TOKEN}` (keep it in a file only you can read), or leave --token and "
        f"{TOKEN_ENV} out: serve then makes one and prints its link"
    )
    if not token.isascii() or not token.isprintable() or " " in token:
        raise HonestscaleError(
            f"the token (--token or {TOKEN_ENV}) holds spaces or characters beyond printable ASCII", fix
        )
    bits, kinds = token_bits(token), len(set(token))
    need = f"it needs at least {MIN_TOKEN_BITS} bits (22 random url-safe characters, or 32 hex digits)"
    if kinds < 8:
        raise HonestscaleError(
            f"the token (--token or {TOKEN_ENV}) is too weak: {len(token)} character(s) of "
            f"only {kinds} different one(s), not a random secret; {need}",
            fix,
        )
    if bits < MIN_TOKEN_BITS:
        raise HonestscaleError(
            f"the token (--token or {TOKEN_ENV}) is too weak: {len(token)} character(s) carry "
            f"at most {bits:.0f} bits; {need}",
            fix,
        )
    if shared and not made_here(token):
        raise HonestscaleError(
            f"the token (--token or {TOKEN_ENV}) was not made by serve: off loopback (or with --allow-host) only a "
            f"token serve made is taken ({TOKEN_PREFIX}..., its last part a checksum of its 256 random bits), since "
            "a chosen one can look random and not be",
            fix,
        )


def machine_name() -> str:
    """This machine's name as others reach it: the fully qualified one unless that is only loopback's."""
    fqdn = socket.getfqdn()
    return fqdn if "." in fqdn and not is_loopback(fqdn) else socket.gethostname()


def make_token() -> str:
    """256 random bits, url-safe, with the checksum ``made_here`` knows them by."""
    body = secrets.token_urlsafe(32)
    return f"{TOKEN_PREFIX}{body}_{_sum(body)}"


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "replace")).digest()


class Access:
    """The server's token (None on loopback without one) and its session key."""

    def __init__(self, token: str | None, hosts: Sequence[str]) -> None:
        self.token = token
        self.hosts = list(hosts)
        self._token_digest = _digest(token) if token is not None else None
        self._key = secrets.token_bytes(32)  # made at start-up: a restart ends every session

    def matches(self, given: str) -> bool:
        assert self._token_digest is not None
        return hmac.compare_digest(_digest(given), self._token_digest)

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def session(self, now: float | None = None) -> str:
        payload = f"{int(now if now is not None else time.time())}.{secrets.token_urlsafe(16)}"
        return f"{payload}.{self._mac(payload)}"

    def valid(self, cookie: str | None, now: float | None = None) -> bool:
        if not cookie or cookie.count(".") != 2:
            return False
        payload, mac = cookie.rsplit(".", 1)
        if not hmac.compare_digest(self._mac(payload).encode(), mac.encode("utf-8", "replace")):
            return False
        issued = int(payload.split(".")[0])
        age = (now if now is not None else time.time()) - issued
        return -60 <= age <= SESSION_MAX_AGE_S

    # -- the exchange ------------------------------------------------------------------------------------------
    def check(self, request: Request) -> tuple[str, str] | None:
        """None when the request may go on; else (why, what to do) for a 401."""
        if self.token is None:
            return None
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            if self.matches(header[7:].strip()):
                return None
            return (
                "the Authorization header's token is not this server's",
                "send 'Authorization: Bearer TOKEN' with the token serve was started with",
            )
        cookie = request.cookies.get(SECURE_SESSION_COOKIE) or request.cookies.get(SESSION_COOKIE)
        if self.valid(cookie):
            return None
        if cookie:
            return (
                "this browser's session has ended (the server was restarted, or it is over a week old)",
                "open the link with ?token=... that serve printed again",
            )
        return (
            "this server needs its token",
            "open the link with ?token=... that serve printed, once (the browser then keeps a session), or send 'Authorization: Bearer TOKEN'",
        )

    def exchange(self, request: Request) -> Response:
        """``?token=`` (already matched): a session cookie, and on to the same address without the token."""
        query = urlencode(
            [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
        )
        raw = request.scope.get("raw_path") or request.scope["path"].encode()
        path = "/" + quote(raw.decode("latin-1"), safe="/%!$&'()*+,;=:@-._~").lstrip("/")  # never //elsewhere
        target = path + (f"?{query}" if query else "")
        response: Response
        if request.headers.get("sec-fetch-site") == "cross-site":
            # a link followed from another site (mail, chat): a SameSite=Strict cookie would not go with a redirect
            # of that navigation, so the page itself moves on (a navigation of this site, replacing the entry)
            url = html.escape(target, quote=True)
            response = HTMLResponse(
                f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" '
                f'content="0; url={url}"><title>honestscale: signed in</title></head><body><p>Signed in. '
                f'<a href="{url}">Go on</a>.</p></body></html>'
            )
        else:
            response = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(
            SECURE_SESSION_COOKIE if secure else SESSION_COOKIE,
            self.session(),
            max_age=SESSION_MAX_AGE_S,
            path="/",
            secure=secure,
            httponly=True,
            samesite="strict",
        )
        return response


class Hosts:
    """Starlette's ``TrustedHostMiddleware`` decides; a refused request gets ``refuse``'s answer (421, or 400
    without a ``Host``) instead of its bare "Invalid host header"."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str], refuse: Any) -> None:
        self.app = app
        self.hosts = list(hosts)
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admitted = False

        async def inner(scope: Scope, receive: Receive, send: Send) -> None:
            nonlocal admitted
            admitted = True
            await self.app(scope, receive, send)

        async def muted(message: Any) -> None:  # the middleware's own refusal is not sent
            if admitted:
                await send(message)

        await TrustedHostMiddleware(inner, allowed_hosts=self.hosts, www_redirect=False)(
            scope, receive, muted
        )
        if not admitted:
            request = Request(scope)
            host = request.headers.get("host")
            shown = ", ".join(h for h in self.hosts if h not in ("localhost",)) or "localhost"
            if not host:
                status, why = 400, "the request names no host (no Host header)"
            else:
                status, why = 421, f"this server does not answer for the name {host!r}"
            response = self.refuse(
                request,
                status,
                f"{why}: it answers only for localhost, {shown} (a page that makes its own "
                "name resolve to this machine must not read it); if a proxy forwards to it under another name, "
                "start honestscale serve with --allow-host NAME",
            )
            await response(scope, receive, send)


__all__ = [
    "TOKEN_ENV",
    "Access",
    "Hosts",
    "allowed_hosts",
    "check_token",
    "is_loopback",
    "machine_name",
    "made_here",
    "make_token",
    "token_bits",
]
