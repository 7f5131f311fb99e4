"""The API's objects as typed dictionaries: the JSON Relay returns, field for field.

Timestamps stay ISO 8601 strings (UTC) as sent. Relay may add fields; they
appear in the dictionaries without a type here.
"""

from __future__ import annotations

from typing import Literal, TypedDict

VerificationStatus = Literal["pending", "approved", "expired", "canceled", "max_attempts_reached"]
SendStatus = Literal["queued", "sent", "delivered", "failed"]
EventType = Literal[
    "verification.sent",
    "verification.delivered",
    "verification.failed",
    "verification.approved",
    "verification.expired",
    "verification.max_attempts_reached",
    "message.sent",
    "message.delivered",
    "message.failed",
]
DeliveryStatus = Literal["none", "pending", "delivered", "dropped"]
Channel = Literal["sms", "whatsapp", "email"]


class ErrorDetail(TypedDict):
    type: str
    code: str
    message: str
    param: str | None
    doc_url: str


class AttemptError(ErrorDetail):
    """Why a carrier refused or could not deliver; `carrier_code` is the carrier's own."""

    carrier_code: str | None


class Attempt(TypedDict):
    """One send on one carrier: failover can make several for one verification or message,
    across carriers and channels."""

    id: str
    object: Literal["attempt"]
    livemode: bool
    status: SendStatus
    channel: Channel
    carrier: str
    at: str
    error: AttemptError | None


class Verification(TypedDict):
    id: str
    object: Literal["verification"]
    livemode: bool
    status: VerificationStatus
    to: str
    channel: Channel
    # None for an email address.
    country: str | None
    sender: str
    locale: str
    code_length: int
    verified: bool
    remaining_checks: int
    attempts: list[Attempt]
    metadata: dict[str, str]
    webhook_url: str | None
    created_at: str
    updated_at: str
    expires_at: str
    approved_at: str | None
    canceled_at: str | None


class Message(TypedDict):
    id: str
    object: Literal["message"]
    livemode: bool
    status: SendStatus
    to: str
    country: str
    sender: str
    locale: str
    attempts: list[Attempt]
    metadata: dict[str, str]
    webhook_url: str | None
    created_at: str
    updated_at: str


class EventData(TypedDict):
    object: Verification | Message


class WebhookEvent(TypedDict):
    """The envelope a webhook delivery carries."""

    id: str
    object: Literal["event"]
    type: EventType
    created_at: str
    livemode: bool
    data: EventData


class DeliveryAttempt(TypedDict):
    at: str
    status_code: int | None
    error: str | None
    duration_ms: int | None


class Event(WebhookEvent):
    """An event as `GET /v1/events` shows it: the envelope and its delivery state."""

    delivery_status: DeliveryStatus
    webhook_url: str | None
    delivery_attempts: list[DeliveryAttempt]


class ErasedCounts(TypedDict):
    verifications: int
    messages: int
    attempts: int
    events: int
    webhook_attempts: int
    idempotency_keys: int
    counters: int


class Erasure(TypedDict):
    """What an erasure deleted; `to` is the destination masked (`+1415…71`)."""

    object: Literal["erasure"]
    livemode: bool
    to: str
    deleted: ErasedCounts
