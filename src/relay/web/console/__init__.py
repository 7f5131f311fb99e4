"""The operator console at /console: server-rendered pages, no script (docs/console.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from relay.errors import RelayError
from relay.services import Services
from relay.web.console import (
    actions,
    auth,
    erasure,
    key_actions,
    keys,
    lists,
    lookup,
    overview,
    routes_page,
    texts,
)
from relay.web.console.auth import Console, Refused
from relay.web.console.pages import HEADERS, page, refusal
from relay.web.errors import status_and_type

PREFIX = "/console"
Page = Callable[[Console, Request], Awaitable[Response]]


def routes(services: Services) -> list[BaseRoute]:
    console = Console.of(services)
    css = files("relay.web.console").joinpath("static/console.css").read_bytes()

    def endpoint(handler: Page) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(console, request)
            except Refused as refused:
                return refused.response
            except RelayError as problem:
                return page("Refused", refusal(problem.message), status=status_and_type(problem)[0])

        return run

    async def stylesheet(request: Request) -> Response:
        headers = {**HEADERS, "Cache-Control": "max-age=3600"}
        return Response(css, media_type="text/css", headers=headers)

    table: list[tuple[str, str, Page]] = [
        ("GET", "", auth.signin_page),
        ("POST", "/sign-in", auth.sign_in),
        ("POST", "/sign-out", auth.sign_out),
        ("GET", "/overview", overview.overview_page),
        ("GET", "/lookup", lookup.lookup_page),
        ("GET", "/timeline/{subject_id}", lookup.timeline_page),
        ("GET", "/verifications", lists.verifications_page),
        ("GET", "/events", lists.events_page),
        ("GET", "/account", actions.account_page),
        ("POST", "/actions/cancel", actions.cancel),
        ("POST", "/actions/erase", erasure.erase),
        ("POST", "/actions/replay", actions.replay_delivery),
        ("POST", "/actions/roll-secret", actions.roll_secret),
        ("POST", "/texts/set", texts.set_text),
        ("POST", "/texts/delete", texts.delete_text),
        ("GET", "/keys", keys.keys_page),
        ("GET", "/routes", routes_page.routes_page),
        ("POST", "/keys/create", key_actions.create),
        ("POST", "/keys/roll", key_actions.roll),
        ("POST", "/keys/restrict", key_actions.restrict),
        ("POST", "/keys/revoke", key_actions.revoke),
    ]
    return [
        Route(PREFIX + "/static/console.css", stylesheet, methods=["GET"]),
        *(Route(PREFIX + path, endpoint(h), methods=[m]) for m, path, h in table),
    ]
