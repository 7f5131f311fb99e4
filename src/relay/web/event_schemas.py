"""Response shapes of the events API, for the OpenAPI document."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from relay.events.models import DeliveryStatus, EventType
from relay.web.schemas import MessageObject, Query, VerificationObject, id_pattern


class DeliveryAttemptObject(BaseModel):
    at: datetime = Field(description="When the attempt started.")
    status_code: int | None = Field(description="The receiver's HTTP status; null without one.")
    error: str | None = Field(
        description="Why the attempt failed (timeout, http_status, redirect, tls_error, "
        "connect_error, refused_address, worker_lost…); null on success."
    )
    duration_ms: int | None


class EventData(BaseModel):
    object: VerificationObject | MessageObject = Field(
        description="The verification or message as it was when the event fired."
    )


class EventObject(BaseModel):
    id: str = Field(description="`evt_…`; the same on every delivery attempt: dedupe on it.")
    object: Literal["event"]
    type: EventType
    created_at: datetime
    livemode: bool
    data: EventData
    delivery_status: DeliveryStatus = Field(
        description="pending, delivered, dropped (retries exhausted) or none (no webhook_url)."
    )
    webhook_url: str | None
    delivery_attempts: list[DeliveryAttemptObject]


class EventList(BaseModel):
    object: Literal["list"]
    url: str
    data: list[EventObject]
    has_more: bool


class EventListQuery(Query):
    limit: int = Field(10, ge=1, le=100, description="Page size.")
    starting_after: str | None = Field(
        None, description="Cursor: an event id. Not with ending_before.", pattern=id_pattern("evt")
    )
    ending_before: str | None = Field(
        None, description="Cursor: an event id. Not with starting_after.", pattern=id_pattern("evt")
    )
    related: str | None = Field(
        None,
        description="Only events about this verification or message.",
        pattern=id_pattern("ver", "msg"),
    )
    type: EventType | None = Field(None, description="Only events of this type.")
    delivery_status: DeliveryStatus | None = Field(
        None, description="Only events in this delivery state."
    )
