"""Lists of verifications and events, paged by the API's own keyset cursors.

The query is validated by the API's query models and read by the same service
calls as GET /v1/verifications and GET /v1/events, so a page deep in the list
costs what the first one does. An admin names the account and mode to list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from relay.accounts.models import Caller
from relay.console.timeline import masked
from relay.errors import RelayError
from relay.events.store import EventQuery
from relay.verifications.pages import ListQuery
from relay.web.console.auth import Console, caller_for, current
from relay.web.console.pages import e, page, refusal, table
from relay.web.console.session import Session
from relay.web.event_schemas import EventListQuery
from relay.web.pagination import require_cursors
from relay.web.schemas import VerificationListQuery

PAGE = 25
_ADMIN_FORM = (
    '<form method="get"><input type="text" name="account" placeholder="acct_…" value="{a}">'
    ' <select name="mode"><option value="live">live</option>'
    '<option value="test"{t}>test</option></select> <button type="submit">List</button></form>'
)


def _params(request: Request, model: type[BaseModel]) -> BaseModel:
    given = {k: v for k, v in request.query_params.items() if k not in ("account", "mode")}
    return model.model_validate({"limit": PAGE, **given})


def _owner(session: Session, request: Request) -> tuple[str, bool] | None:
    if not session.is_admin:
        assert session.account_id is not None
        return session.account_id, bool(session.livemode)
    account = request.query_params.get("account", "")
    if not account.startswith("acct_"):
        return None
    return account, request.query_params.get("mode", "live") == "live"


@dataclass(frozen=True)
class _Listed:
    """One page of a list, as the console shows it."""

    headers: list[str]
    rows: list[list[Any]]
    ids: list[str]
    has_more: bool


# One page's read: the caller, the validated query parameters.
_Read = Callable[[Caller, Any], Awaitable[_Listed]]


async def _list_page(
    console: Console,
    request: Request,
    *,
    title: str,
    here: str,
    model: type[BaseModel],
    prefix: str,
    noun: str,
    read: _Read,
) -> Response:
    """A list page: the query validated by the API's model, the cursors checked as the
    API checks them, the page read by `read`, and the pager."""
    session = await current(console, request)
    owner = _owner(session, request)
    body = _admin_form(session, request)
    if owner is None:
        return page(title, body, session=session, here=here)
    try:
        params: Any = _params(request, model)
        require_cursors(params.starting_after, params.ending_before, prefix=prefix, noun=noun)
        listed = await read(caller_for(session, *owner), params)
    except (ValidationError, RelayError) as problem:
        return page(title, body + refusal(_why(problem)), session=session, here=here, status=400)
    body += table(listed.headers, listed.rows, raw=True)
    body += _pager(request, listed.ids, listed.has_more, params.ending_before is not None)
    return page(title, body, session=session, here=here)


async def verifications_page(console: Console, request: Request) -> Response:
    async def read(caller: Caller, params: VerificationListQuery) -> _Listed:
        query = ListQuery(
            limit=PAGE,
            starting_after=params.starting_after,
            ending_before=params.ending_before,
            status=params.status,
        )
        found, has_more = await console.services.verifications.list(caller, query)
        now = console.services.clock.now()
        rows: list[list[Any]] = [
            [
                f'<a href="/console/timeline/{e(v.id)}">{e(v.id)}</a>',
                e(masked(v.to)),
                e(v.status_at(now).value),
                e(v.created_at),
            ]
            for v in found
        ]
        return _Listed(["Id", "Number", "Status", "Created"], rows, [v.id for v in found], has_more)

    return await _list_page(
        console,
        request,
        title="Verifications",
        here="lists",
        model=VerificationListQuery,
        prefix="ver",
        noun="a verification id",
        read=read,
    )


async def events_page(console: Console, request: Request) -> Response:
    async def read(caller: Caller, params: EventListQuery) -> _Listed:
        query = EventQuery(
            limit=PAGE,
            starting_after=params.starting_after,
            ending_before=params.ending_before,
            related=params.related,
            type=params.type,
            delivery_status=params.delivery_status,
        )
        found, has_more = await console.services.events.list_events(caller, query)
        rows: list[list[Any]] = [
            [e(ev.id), e(ev.type.value), e(ev.delivery_status.value), len(ev.attempts)]
            for ev in found
        ]
        return _Listed(
            ["Id", "Type", "Delivery", "Attempts"], rows, [ev.id for ev in found], has_more
        )

    return await _list_page(
        console,
        request,
        title="Events",
        here="events",
        model=EventListQuery,
        prefix="evt",
        noun="an event id",
        read=read,
    )


def _why(problem: Exception) -> str:
    if isinstance(problem, RelayError):
        return problem.message
    return "Those list parameters are not valid."


def _admin_form(session: Session, request: Request) -> str:
    if not session.is_admin:
        return ""
    test = " selected" if request.query_params.get("mode") == "test" else ""
    return _ADMIN_FORM.format(a=e(request.query_params.get("account", "")), t=test)


def _pager(request: Request, ids: list[str], has_more: bool, backwards: bool) -> str:
    """Newer and older links, as the API's has_more and cursors allow."""
    keep: dict[str, Any] = {
        k: v
        for k, v in request.query_params.items()
        if k not in ("starting_after", "ending_before")
    }
    links = []
    cursor_given = "starting_after" in request.query_params or backwards
    newer = (has_more if backwards else cursor_given) and ids
    older = (cursor_given if backwards else has_more) and ids
    if newer:
        links.append(
            f'<a id="newer" href="?{e(urlencode({**keep, "ending_before": ids[0]}))}">← Newer</a>'
        )
    if older:
        links.append(
            f'<a id="older" href="?{e(urlencode({**keep, "starting_after": ids[-1]}))}">Older →</a>'
        )
    return f'<p class="pager">{" · ".join(links)}</p>'
