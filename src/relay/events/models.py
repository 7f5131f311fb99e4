"""Event types and the envelope, pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

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
    data_object: dict[str, Any]

    def envelope(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "event",
            "type": _TYPE_TEXT[self.type],
            "created_at": isoformat(self.created_at),
            "livemode": self.livemode,
            "data": {"object": self.data_object},
        }
