"""Attempts, pure: one try of one message on one carrier, shared by verifications and messages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from relay.clock import isoformat
from relay.records import changed, fast_init


class AttemptStatus(StrEnum):
    QUEUED = "queued"
    SENT = "sent"
    DELIVERED = "delivered"
    FAILED = "failed"


# An enum's `.value` is a Python property; every answer shows each attempt's.
_STATUS_TEXT = {status: status.value for status in AttemptStatus}


@fast_init
@dataclass(frozen=True)
class Attempt:
    id: str
    status: AttemptStatus
    carrier: str
    at: datetime
    error: dict[str, Any] | None
    livemode: bool
    channel: str = "sms"

    def with_status(self, status: AttemptStatus) -> Attempt:
        return changed(self, status=status)

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "attempt",
            "livemode": self.livemode,
            "status": _STATUS_TEXT[self.status],
            "channel": self.channel,
            "carrier": self.carrier,
            "at": isoformat(self.at),
            "error": self.error,
        }


def shown_as_sent(shown: list[dict[str, Any]], attempt_id: str) -> list[dict[str, Any]]:
    """Attempts as `Attempt.to_api` shows them, with `attempt_id`'s status sent (as its
    owner's events show it when it was sent, before its receipt)."""
    return [
        {**attempt, "status": _SENT} if attempt["id"] == attempt_id else attempt
        for attempt in shown
    ]


_SENT = _STATUS_TEXT[AttemptStatus.SENT]
