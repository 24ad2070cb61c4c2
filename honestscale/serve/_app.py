"""The ASGI application: pages (Jinja2, autoescaped) and the JSON API over one :class:`State`.

No route writes to the store. Files are served only from what the server drew itself (a campaign's figures and
exports, by the names it wrote) and from the package's ``static`` folder; any other path is a 404 page.
"""

from __future__ import annotations

import math
import sys
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl
from jinja2 import ChoiceLoader, PackageLoader
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from honestscale.claims import ClaimsFile
from honestscale.display import file_name
from honestscale.errors import HonestscaleError
from honestscale.judged import STEP_COLUMNS
from honestscale.lint import formats, registry
from honestscale.report import environment
from honestscale.serve import _run
from honestscale.serve._access import Access, Hosts
from honestscale.serve._claims import ClaimsPages
from honestscale.serve._compare import ComparePages
from honestscale.serve._state import Busy, Campaign, Overview, State
from honestscale.store import NoSuchCampaign, hidden, queries
from honestscale.store import shown as masked
from honestscale.view import kind_words

STATIC = Path(__file__).parent / "static"
PAGE_SIZE = 100
RUN_PAGES_KEPT = 64
# what lint's findings may say (honestscale.lint: a Finding's severity and outcome): the Findings page's filters
FINDING_SEVERITIES = ("error", "warning", "info")
FINDING_OUTCOMES = ("fail", "cannot_verify")
# What a page may load: only this server's own files; no inline script, nothing from elsewhere (a hostile run name
# that got past escaping still could neither run nor fetch), and no inline style either (the figures' SVG carries its
# styles as presentation attributes: report.presentational)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def _env() -> Any:
    env = environment()
    assert env.loader is not None
    env.loader = ChoiceLoader([PackageLoader("honestscale.serve", "templates"), env.loader])
    env.filters.update(when=_when, quote=lambda s: quote(str(s), safe=""), kind_words=kind_words)
    env.globals["step_columns"] = STEP_COLUMNS
    return env


def _when(epoch: float | None) -> str:
    return "–" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


class Dashboard:
    def __init__(
        self, state: State, access: Access, watching: str | None, claims: Sequence[ClaimsFile] = ()
    ) -> None:
        self.state = state
        self.access = access
        self.watching = watching
        self.env = _env()
        # paths on pages: relative to the store's folder or --path-root (templates' `path` filter)
        self.env.globals["path_root"] = state.path_root
        # run pages drawn, until the store changes (the store's stamp is in the key), the oldest dropped first
        self._run_pages: OrderedDict[tuple[Any, ...], _run.RunPage] = OrderedDict()
        self.compare = ComparePages(state, self.html, self.json)
        self.claims = ClaimsPages(state, claims, self.html, self.json)
        self.env.globals["claims"] = bool(claims)  # the navigation shows Claims where there are some

    # -- responses ---------------------------------------------------------------------------------------------
    def html(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        busy = self.state.busy
        body = self.env.get_template(template).render(
            busy=busy, watching=self.watching, path=request.url.path, **context
        )
        return HTMLResponse(body, status_code=status)

    def json(self, data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(_clean(data), status_code=status)

    def _campaign(self, request: Request) -> Campaign:
        name = request.path_params["name"]
        try:
            return self.state.campaign(name)
        except NoSuchCampaign as exc:  # any other failure of the store is a 503 (_error), never "not found"
            raise HTTPException(404, f"{exc.message}: {exc.fix}") from None

    # -- pages -------------------------------------------------------------------------------------------------
    def overview_rows(self, overview: Overview) -> list[dict[str, Any]]:
        rows = []
        for row in overview.rows:
            entry = self.state.cached(row["campaign"]) if row["campaign"] else None
            rows.append(
                row
                | {
                    "verdicts": entry.verdicts if entry else None,
                    "fresh": self.state.fresh(row),
                    "totals": entry.model.totals if entry else None,
                }
            )
        return rows

    def campaigns(self, request: Request) -> Response:
        overview = self.state.overview()
        return self.html(
            request, "campaigns.html.j2", rows=self.overview_rows(overview), read_at=overview.read_at
        )

    def campaign_rows(self, request: Request) -> Response:
        return self.html(request, "campaign_rows.html.j2", rows=self.overview_rows(self.state.overview()))

    def campaign(self, request: Request) -> Response:
        entry = self._campaign(request)
        # shown from the plan: the figures are drawn after the page, when the browser asks for their files
        contents = self.state.contents(entry)
        base = f"/campaigns/{quote(entry.name, safe='')}"
        return self.html(
            request,
            "campaign.html.j2",
            entry=entry,
            model=entry.model,
            scaling=contents.scaling,
            frameworks=contents.frameworks,
            layouts=contents.layouts,
            assets_url=f"{base}/files/",
            base=base,
            run_url="/runs/",
            files=sorted(contents.exports),
            fresh=entry.fingerprint == self.state.fingerprint(entry.name),
        )

    def campaign_file(self, request: Request) -> Response:
        entry = self._campaign(request)
        name = request.path_params["file"]
        # only what the server writes, by the names it writes: no path reaches elsewhere
        if name not in {*self.state.contents(entry).exports, "report.css"}:
            raise HTTPException(404, f"campaign {entry.name} has no file {name!r}")
        return FileResponse(self.state.page(entry).assets / name)

    def campaign_pdf(self, request: Request) -> Response:
        entry = self._campaign(request)
        return FileResponse(
            self.state.pdf(entry),
            media_type="application/pdf",
            filename=f"report-{file_name(entry.name)}.pdf",
        )

    def campaign_json(self, request: Request) -> Response:
        return self.json(self._campaign(request).model.as_json())

    def campaign_sarif(self, request: Request) -> Response:
        return self.json(formats.as_sarif(self._campaign(request).result))

    def run(self, request: Request) -> Response:
        return self.html(request, "run.html.j2", page=self._run(request))

    def run_json(self, request: Request) -> Response:
        return self.json(self._run(request).as_json())

    def _run(self, request: Request) -> _run.RunPage:
        """The run's page: its record (``show``'s, judged with its campaign's model, or a run of no campaign with
        the whole store as ``lint`` judges it) and its figures, kept until a writer commits."""
        run_id = request.path_params["run_id"]
        key = (run_id, self.state.stamp())
        page = self._run_pages.get(key)
        if page is None:
            found = self.state.read(lambda con: _run.campaign_of(con, run_id))
            if found is None:
                raise HTTPException(404, f"no run {run_id!r} in the store: see the runs page")
            j = self.state.campaign(found[0]).judged if found[0] else self.state.no_campaign()
            data = self.state.read(lambda con: _run.read(con, run_id, j))
            with self.state.draw_lock:
                page = _run.page(data)
            self._run_pages[key] = page
            while len(self._run_pages) > RUN_PAGES_KEPT:
                self._run_pages.popitem(last=False)
        return page

    def _all_runs(self) -> pl.DataFrame:
        return self.state.read(lambda con: queries.runs(con))

    def _filtered(self, request: Request, frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str]]:
        params = {k: v for k, v in request.query_params.items() if v != ""}
        for column in ("campaign", "framework", "system", "status", "purpose"):
            if column in params:
                frame = frame.filter(pl.col(column).cast(pl.Utf8).fill_null("") == params[column])
        if "workers" in params:
            try:
                workers = int(params["workers"])
            except ValueError:
                raise HTTPException(400, f"workers={params['workers']!r} is not a whole number") from None
            frame = frame.filter(pl.col("world_size") == workers)
        if "q" in params:
            q = params["q"].lower()
            frame = frame.filter(
                pl.col("run_id").str.to_lowercase().str.contains(q, literal=True)
                | pl.col("name").fill_null("").str.to_lowercase().str.contains(q, literal=True)
            )
        return frame, params

    def runs(self, request: Request) -> Response:
        everything = self._all_runs()
        frame, params = self._filtered(request, everything)
        try:
            page = max(1, int(params.get("page", "1")))
        except ValueError:
            raise HTTPException(400, f"page={params['page']!r} is not a whole number") from None
        shown = frame.slice((page - 1) * PAGE_SIZE, PAGE_SIZE).to_dicts()
        choices = {
            c: sorted({str(v) for v in everything[c].drop_nulls().to_list()})
            for c in ("campaign", "framework", "system", "status", "purpose")
        }
        choices["workers"] = [str(w) for w in sorted(set(everything["world_size"].drop_nulls().to_list()))]
        rest = {k: v for k, v in params.items() if k != "page"}
        return self.html(
            request,
            "run_list.html.j2",
            runs=shown,
            total=frame.height,
            everything=everything.height,
            page=page,
            pages=max(1, math.ceil(frame.height / PAGE_SIZE)),
            params=params,
            choices=choices,
            rest=rest,
            first=(page - 1) * PAGE_SIZE,
        )

    def runs_json(self, request: Request) -> Response:
        frame, _ = self._filtered(request, self._all_runs())
        return self.json(frame.to_dicts())

    def _findings(
        self, request: Request
    ) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, list[str]]]:
        params = {k: v for k, v in request.query_params.items() if v != ""}
        known = {
            "code": sorted(registry()),
            "severity": list(FINDING_SEVERITIES),
            "outcome": list(FINDING_OUTCOMES),
            "suppressed": ["yes", "no"],
        }
        for key, values in known.items():
            if key in params and params[key] not in values:
                raise HTTPException(400, f"{key}={params[key]!r} is none of {', '.join(values)}")
        found: list[dict[str, Any]] = []
        pending = []
        for row in self.state.overview().rows:
            name = row["campaign"]
            entry = self.state.cached(name) if name else None
            if entry is None:
                if name and row["landed"]:
                    pending.append(name)
                continue
            anchors = {
                c.id: f"cmp-{i}"
                for i, c in enumerate([c for c in entry.model.comparisons if c.kind == "scaling"], start=1)
            }
            for f in entry.model.lint["findings"]:
                found.append(f | {"campaign": name, "anchor": anchors.get(f["comparison"] or "")})
        choices = {
            "code": sorted({f["code"] for f in found}),
            "severity": sorted({f["severity"] for f in found}),
            "outcome": sorted({f["outcome"] for f in found}),
            "campaign": sorted({f["campaign"] for f in found}),
        }
        for key in ("code", "severity", "outcome", "campaign"):
            if key in params:
                found = [f for f in found if f[key] == params[key]]
        if params.get("suppressed") != "yes":
            found = [f for f in found if not f["suppressed"]]
        choices["pending"] = pending
        return found, params, choices

    def findings(self, request: Request) -> Response:
        found, params, choices = self._findings(request)
        rules = registry()
        docs = {
            code: {"name": rules[code].name, "summary": rules[code].summary} | rules[code].doc_sections()
            for code in sorted({f["code"] for f in found})
            if code in rules
        }
        return self.html(
            request,
            "findings.html.j2",
            findings=found[:500],
            total=len(found),
            params=params,
            choices=choices,
            docs=docs,
        )

    def findings_json(self, request: Request) -> Response:
        return self.json(self._findings(request)[0])

    def campaigns_json(self, request: Request) -> Response:
        overview = self.state.overview()
        return self.json(
            {
                "read_at": overview.read_at,
                "busy": self.state.busy,
                "campaigns": [
                    {k: v for k, v in row.items() if k != "spec_hash"} for row in self.overview_rows(overview)
                ],
            }
        )

    # -- the application ---------------------------------------------------------------------------------------
    def app(self) -> Starlette:
        routes = [
            Route("/", self.campaigns),
            Route("/fragments/campaigns", self.campaign_rows),
            # names may hold any character, "/" included (an ingested run_start's campaign): the suffixed routes first
            Route("/campaigns/{name:path}/report.pdf", self.campaign_pdf),
            Route("/campaigns/{name:path}/report.json", self.campaign_json),
            Route("/campaigns/{name:path}/lint.sarif", self.campaign_sarif),
            Route("/campaigns/{name:path}/files/{file}", self.campaign_file),
            Route("/campaigns/{name:path}", self.campaign),
            Route("/runs", self.runs),
            Route("/runs/{run_id:path}", self.run),
            Route("/findings", self.findings),
            Route("/compare", self.compare.page),
            Route("/claims", self.claims.page),
            Route("/api/claims", self.claims.api),
            Route("/compare/{key}/{file}", self.compare.figure),
            Route("/api/compare", self.compare.api),
            Route("/api/campaigns", self.campaigns_json),
            Route("/api/campaigns/{name:path}", self.campaign_json),
            Route("/api/runs", self.runs_json),
            Route("/api/runs/{run_id:path}", self.run_json),
            Route("/api/findings", self.findings_json),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
        return Starlette(
            routes=routes,
            middleware=[
                Middleware(Hosts, hosts=self.access.hosts, refuse=self._refused),
                Middleware(_Guard, dashboard=self),
            ],
            exception_handlers={
                HTTPException: self._http_error,
                Busy: self._error,
                HonestscaleError: self._error,
                Exception: self._error,
            },
        )

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return self._problem(request, exc.status_code, str(exc.detail))

    async def _error(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, Busy):
            response = self._problem(
                request,
                503,
                f"the store is being written ({exc.why}) and this page has not "
                "been read before; it loads again by itself in a few seconds",
            )
            response.headers["Retry-After"] = "3"
            return response
        if isinstance(exc, HonestscaleError):
            # the server's log has the whole message; a page never shows the store's address (its catalog's
            # connection string), only that the store cannot be read and what to expect
            print(f"{time.strftime('%H:%M:%S')} {request.url.path}: {masked(str(exc))}", file=sys.stderr)
            said = hidden(f"{exc.message}: {exc.fix}" if exc.fix else exc.message, str(self.state.store))
            response = self._problem(
                request,
                503,
                f"the store cannot be read now: {said}; this page loads again by itself once it can",
            )
            response.headers["Retry-After"] = "10"
            return response
        # a bug: the server's log has the traceback (uvicorn prints it), the page the one line
        return self._problem(
            request, 500, f"internal error ({type(exc).__name__}); the server log has the details"
        )

    def _refused(self, request: Request, status: int, reason: str) -> Response:
        response = self._problem(request, status, reason)
        _secure(response)
        return response

    def _problem(self, request: Request, status: int, reason: str) -> Response:
        if request.url.path.startswith("/api/"):
            return self.json({"error": reason, "status": status}, status)
        return self.html(request, "error.html.j2", status=status, reason=reason, code=status)


class _Guard(BaseHTTPMiddleware):
    """The token (when the server has one: beyond loopback always), its exchange for a session cookie, and the
    headers every answer carries."""

    def __init__(self, app: Any, dashboard: Dashboard) -> None:
        super().__init__(app)
        self.dashboard = dashboard

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        access = self.dashboard.access
        if access.token is not None:
            given = request.query_params.get("token")
            refused = access.check(request) if given is None else None
            if given is not None and not access.matches(given):
                refused = (
                    "the link's token is not this server's",
                    "open the link serve printed, with its whole token",
                )
            if refused is not None:
                response: Response = self.dashboard._problem(request, 401, f"{refused[0]}: {refused[1]}")
                response.headers["WWW-Authenticate"] = "Bearer"
                _secure(response)
                return response
            if given is not None:
                response = access.exchange(request)
                _secure(response)
                return response
        started = time.perf_counter()
        response = await call_next(request)
        response.headers["Server-Timing"] = f"app;dur={1000 * (time.perf_counter() - started):.1f}"
        _secure(response)
        return response


def _secure(response: Response) -> None:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"


__all__ = ["Dashboard"]
