"""HTTP routes of the events API: what happened, and whether its webhook got through."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import Response

from relay.errors import ParameterInvalid, ResourceMissing
from relay.events.models import DeliveryStatus, EventType
from relay.events.store import EventQuery
from relay.ids import is_id
from relay.web.event_schemas import EventList, EventObject
from relay.web.pagination import require_cursors
from relay.web.responses import JsonResponse
from relay.web.routes import ERRORS, CallerDep, ServicesDep

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["events"])

_RELATED_PREFIXES = ("ver", "msg")


@router.get(
    "/events/{event_id}",
    response_model=EventObject,
    summary="Retrieve an event",
    operation_id="retrieve_event",
)
async def retrieve_event(event_id: str, who: CallerDep, app: ServicesDep) -> Response:
    """The event envelope as delivered, with its delivery state and attempts."""
    if not is_id(event_id, "evt"):
        raise ResourceMissing(f"No such event: {event_id}", param="id")
    event = await app.events.retrieve(who, event_id)
    return JsonResponse(event.to_api())


@router.get(
    "/events",
    response_model=EventList,
    summary="List events",
    operation_id="list_events",
)
async def list_events(
    who: CallerDep,
    app: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    starting_after: Annotated[str | None, Query(description="Cursor: an event id")] = None,
    ending_before: Annotated[str | None, Query(description="Cursor: an event id")] = None,
    related: Annotated[
        str | None, Query(description="Only events about this object (`ver_…` or `msg_…`)")
    ] = None,
    event_type: Annotated[EventType | None, Query(alias="type")] = None,
    delivery_status: DeliveryStatus | None = None,
) -> Response:
    """Newest first, keyset-paginated. Use it to reconcile after a dropped delivery."""
    require_cursors(starting_after, ending_before, prefix="evt", noun="an event id")
    if related is not None and not any(is_id(related, p) for p in _RELATED_PREFIXES):
        raise ParameterInvalid("related must be a verification or message id.", param="related")
    query = EventQuery(
        limit=limit,
        starting_after=starting_after,
        ending_before=ending_before,
        related=related,
        type=event_type,
        delivery_status=delivery_status,
    )
    page, has_more = await app.events.list_events(who, query)
    return JsonResponse(
        {
            "object": "list",
            "url": "/v1/events",
            "data": [event.to_api() for event in page],
            "has_more": has_more,
        }
    )
