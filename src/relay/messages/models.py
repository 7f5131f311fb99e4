"""The Send API's message, pure: the client's own code, delivered by Relay's routes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from relay.clock import isoformat
from relay.delivery.attempts import Attempt, shown_as_sent
from relay.records import fast_init


class MessageStatus(StrEnum):
    QUEUED = "queued"  # accepted, no carrier has taken it yet
    SENT = "sent"  # a carrier took it; no final receipt yet
    DELIVERED = "delivered"
    FAILED = "failed"  # every route failed, or the failover window closed


# An enum's `.value` is a Python property: read per answer.
_STATUS_TEXT = {status: status.value for status in MessageStatus}


@fast_init
@dataclass(frozen=True)
class Message:
    id: str
    account_id: str
    livemode: bool
    to: str
    country: str
    sender: str
    locale: str
    status: MessageStatus
    metadata: dict[str, str]
    webhook_url: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    attempts: tuple[Attempt, ...] = ()

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "message",
            "livemode": self.livemode,
            "status": _STATUS_TEXT[self.status],
            "to": self.to,
            "country": self.country,
            "sender": self.sender,
            "locale": self.locale,
            "attempts": [attempt.to_api() for attempt in self.attempts],
            "metadata": self.metadata,
            "webhook_url": self.webhook_url,
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }

    @property
    def is_open(self) -> bool:
        """May another attempt still be sent?"""
        return self.status in (MessageStatus.QUEUED, MessageStatus.SENT)


class _Shown:
    """The last message `as_shown` made, and how."""

    last: tuple[Message | None, dict[str, Any]] = (None, {})


def as_shown(message: Message) -> dict[str, Any]:
    """`message.to_api()`, made once for this very record: a send that ends in its unit
    answers with the message its last event shows. Held by identity, the record held with
    it; nothing changes a record or what this returns once made."""
    last, view = _Shown.last
    if last is message:
        return view
    view = message.to_api()
    _Shown.last = (message, view)
    return view


def sent_from(shown: dict[str, Any], attempt_id: str) -> dict[str, Any]:
    """As events show a message when `attempt_id` was sent, before that attempt's receipt,
    from `shown`, its `to_api`: it is sent, and so is that attempt."""
    return {
        **shown,
        "status": _SENT,
        "attempts": shown_as_sent(shown["attempts"], attempt_id),
    }


_SENT = _STATUS_TEXT[MessageStatus.SENT]
