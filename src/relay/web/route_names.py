"""The route template a request matched, for labels: never the raw path, whose ids
would make a new series per request."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

# Every path no route matches shares this label.
UNMATCHED = "unmatched"


class RouteNames:
    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._routes = [route for route in routes if isinstance(route, Route)]

    def __call__(self, scope: Scope) -> str:
        # The router left its endpoint in the scope (`relay.web.dispatch.PathEndpoint`).
        path = getattr(scope.get("endpoint"), "path", None)
        if isinstance(path, str):
            return path
        # Answered before the router ran (a refusal at the edge, a rate limit).
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                return route.path
        return UNMATCHED
