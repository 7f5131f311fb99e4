"""HTTP routes of the events API: what happened, and whether its webhook got through."""

from __future__ import annotations

from starlette.responses import Response

from relay.errors import ParameterInvalid, ResourceMissing
from relay.events.store import EventQuery
from relay.ids import is_id
from relay.web.event_schemas import EventList, EventListQuery, EventObject
from relay.web.operations import Call, Operation
from relay.web.pagination import require_cursors
from relay.web.responses import JsonResponse

_RELATED_PREFIXES = ("ver", "msg")


async def retrieve_event(call: Call) -> Response:
    event_id = call.path["event_id"]
    if not is_id(event_id, "evt"):
        raise ResourceMissing(f"No such event: {event_id}", param="id")
    event = await call.services.events.retrieve(call.who, event_id)
    return JsonResponse(event.to_api())


async def list_events(call: Call) -> Response:
    params = call.query
    assert isinstance(params, EventListQuery)
    require_cursors(params.starting_after, params.ending_before, prefix="evt", noun="an event id")
    related = params.related
    if related is not None and not any(is_id(related, p) for p in _RELATED_PREFIXES):
        raise ParameterInvalid("related must be a verification or message id.", param="related")
    query = EventQuery(
        limit=params.limit,
        starting_after=params.starting_after,
        ending_before=params.ending_before,
        related=related,
        type=params.type,
        delivery_status=params.delivery_status,
    )
    page, has_more = await call.services.events.list_events(call.who, query)
    return JsonResponse(
        {
            "object": "list",
            "url": "/v1/events",
            "data": [event.to_api() for event in page],
            "has_more": has_more,
        }
    )


OPERATIONS = [
    Operation(
        "GET",
        "/v1/events/{event_id}",
        retrieve_event,
        "retrieve_event",
        summary="Retrieve an event",
        description="The event envelope as delivered, with its delivery state and attempts.",
        response=EventObject,
        tags=("events",),
    ),
    Operation(
        "GET",
        "/v1/events",
        list_events,
        "list_events",
        summary="List events",
        description="Newest first, keyset-paginated. Use it to reconcile after a dropped delivery.",
        query=EventListQuery,
        response=EventList,
        tags=("events",),
    ),
]
