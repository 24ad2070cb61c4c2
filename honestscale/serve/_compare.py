"""The Compare page: ``honestscale compare A B`` in the browser (the same comparison, section template and figures as
``compare --output``), and ``/api/compare`` (its JSON). Comparisons are kept until the store changes."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from honestscale import compare as comparing
from honestscale.report import PairView, compare_context, pair_views
from honestscale.serve._state import State
from honestscale.view import View, build

KEPT = 16


class ComparePages:
    def __init__(self, state: State, html: Callable[..., Response], json: Callable[[Any], Response]) -> None:
        self.state = state
        self.html = html
        self.json = json
        self._view: tuple[tuple[Any, ...], View] | None = None
        self._done: OrderedDict[tuple[Any, ...], tuple[comparing.Result, list[PairView]]] = OrderedDict()
        # the key in a page's figure URLs -> the question it asked (the latest ones; older figure URLs answer 404)
        self._asked: OrderedDict[str, tuple[str, str, tuple[str, ...]]] = OrderedDict()

    def view(self) -> View:
        stamp = self.state.stamp()
        if self._view is None or self._view[0] != stamp:
            self._view = (stamp, self.state.read(build))
        return self._view[1]

    @staticmethod
    def _params(request: Request) -> tuple[str, str, tuple[str, ...]]:
        q = request.query_params
        factor = tuple(f.strip() for f in q.get("factor", "").split(",") if f.strip())
        return q.get("a", "").strip(), q.get("b", "").strip(), factor

    def _result(
        self, a: str, b: str, factor: tuple[str, ...]
    ) -> tuple[str, comparing.Result, list[PairView]]:
        view = self.view()
        key = hashlib.sha256(repr((a, b, factor)).encode()).hexdigest()[:16]
        done = (a, b, factor, self.state.stamp())
        if done not in self._done:
            try:
                result = comparing.compare(view, a, b, factor=factor, suppressions=self.state.suppressions)
            except comparing.SelectorError as exc:
                raise HTTPException(400, f"{exc.message}: {exc.fix}" if exc.fix else exc.message) from None
            self._done[done] = (result, pair_views(result, None))
            while len(self._done) > KEPT:
                self._done.popitem(last=False)
        self._asked[key] = (a, b, factor)
        self._asked.move_to_end(key)
        while len(self._asked) > 16 * KEPT:
            self._asked.popitem(last=False)
        return key, *self._done[done]

    def page(self, request: Request) -> Response:
        a, b, factor = self._params(request)
        campaigns = sorted({r.campaign for r in self.view().runs if r.campaign})
        context: dict[str, object] = {"a": a, "b": b, "factor": ",".join(factor), "campaigns": campaigns}
        if a and b:
            key, result, views = self._result(a, b, factor)
            context |= compare_context(result, views) | {
                "assets_url": f"/compare/{key}/",
                "run_url": "/runs/",
            }
        return self.html(request, "compare_page.html.j2", **context)

    def figure(self, request: Request) -> Response:
        asked = self._asked.get(request.path_params["key"])
        name = request.path_params["file"]
        if asked is None or not name.startswith("pair") or not name.endswith(".svg"):
            raise HTTPException(404, f"no figure {name!r}: open the comparison first")
        _, _, views = self._result(*asked)
        svg = next((v.svg for v in views if f"{v.figure}.svg" == name), None)
        if svg is None:
            raise HTTPException(404, f"no figure {name!r} in this comparison")
        return Response(svg, media_type="image/svg+xml")

    def api(self, request: Request) -> Response:
        a, b, factor = self._params(request)
        if not (a and b):
            raise HTTPException(400, "give both sides: /api/compare?a=CAMPAIGN&b=campaign=x,workers=8")
        _, result, _ = self._result(a, b, factor)
        return self.json(result.as_json())
