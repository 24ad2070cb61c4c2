"""The Claims page: the verdicts of the claims files given to ``serve --claims`` (``honestscale claims check`` in the
browser), judged again whenever the store changes, and ``/api/claims`` (their JSON). The files are read once, at
start: a path is never taken from a browser, and nothing is written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from honestscale import claims
from honestscale.claims import ClaimsFile, Verdict
from honestscale.serve._state import State
from honestscale.view import build


class ClaimsPages:
    def __init__(
        self,
        state: State,
        files: Sequence[ClaimsFile],
        html: Callable[..., Response],
        json: Callable[[Any], Response],
    ) -> None:
        self.state = state
        self.files = list(files)
        self.html = html
        self.json = json
        self._judged: tuple[tuple[Any, ...], list[tuple[ClaimsFile, list[Verdict]]]] | None = None

    def judged(self) -> list[tuple[ClaimsFile, list[Verdict]]]:
        """Each file with its verdicts, judged on the store as it is now (again only when it changed)."""
        stamp = self.state.stamp()
        if self._judged is None or self._judged[0] != stamp:
            view = self.state.read(build)
            self._judged = (stamp, [(f, claims.check(view, f)) for f in self.files])
        return self._judged[1]

    def page(self, request: Request) -> Response:
        files = [
            {"name": f.path.name, "verdicts": vs, "exit_code": claims.exit_code(vs)}
            for f, vs in self.judged()
        ]
        return self.html(request, "claims.html.j2", files=files)

    def api(self, request: Request) -> Response:
        return self.json(
            {
                "schema": claims.SCHEMA,
                "files": [
                    {
                        "file": f.path.name,
                        "exit_code": claims.exit_code(vs),
                        "claims": [v.as_json() for v in vs],
                    }
                    for f, vs in self.judged()
                ],
            }
        )
