"""Event types and the envelope, pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson

from relay.clock import isoformat
from relay.records import fast_init


class EventType(StrEnum):
    VERIFICATION_SENT = "verification.sent"
    VERIFICATION_DELIVERED = "verification.delivered"
    VERIFICATION_FAILED = "verification.failed"
    VERIFICATION_APPROVED = "verification.approved"
    VERIFICATION_EXPIRED = "verification.expired"
    VERIFICATION_MAX_ATTEMPTS_REACHED = "verification.max_attempts_reached"
    MESSAGE_SENT = "message.sent"
    MESSAGE_DELIVERED = "message.delivered"
    MESSAGE_FAILED = "message.failed"


# An enum's `.value` is a Python property: read per event.
_TYPE_TEXT = {kind: kind.value for kind in EventType}
_TYPE_JSON = {kind: orjson.dumps(kind.value).decode() for kind in EventType}
_BOOL_JSON = {True: "true", False: "false"}

# What an event shows of its object: the object as a dict, or its JSON as already
# rendered (an answer's body that shows the same object at the same moment).
Shown = dict[str, Any] | bytes


class DeliveryStatus(StrEnum):
    NONE = "none"  # the object has no webhook_url: nothing to deliver
    PENDING = "pending"
    DELIVERED = "delivered"
    DROPPED = "dropped"


@fast_init
@dataclass(frozen=True)
class NewEvent:
    id: str
    type: EventType
    created_at: datetime
    livemode: bool
    data_object: Shown

    def envelope(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "event",
            "type": _TYPE_TEXT[self.type],
            "created_at": isoformat(self.created_at),
            "livemode": self.livemode,
            "data": {"object": _object(self.data_object)},
        }

    def payload(self) -> str:
        """`envelope()` as compact JSON, as `orjson.dumps` writes it."""
        return payload_json(
            orjson.dumps(self.id).decode(),
            self.type,
            self.created_at,
            self.livemode,
            self.data_object,
        )


def payload_json(
    id_json: str, kind: EventType, created_at: datetime, livemode: bool, data: Shown
) -> str:
    """An event's envelope as compact JSON, as `orjson.dumps` writes it (`id_json`: its id
    as JSON): the object's JSON put in as rendered, not made again."""
    shown = (data if isinstance(data, bytes) else orjson.dumps(data)).decode()
    return (
        f'{{"id":{id_json},"object":"event","type":{_TYPE_JSON[kind]},'
        f'"created_at":"{isoformat(created_at)}","livemode":{_BOOL_JSON[livemode]},'
        f'"data":{{"object":{shown}}}}}'
    )


def _object(shown: Shown) -> dict[str, Any] | orjson.Fragment:
    return orjson.Fragment(shown) if isinstance(shown, bytes) else shown
