"""The outbox: an event row is written in the transaction of the change it reports."""

from __future__ import annotations

import orjson
from sqlalchemy import Connection, insert

from relay.db.tables import events
from relay.events.models import DeliveryStatus, NewEvent


def record(
    conn: Connection, event: NewEvent, *, account_id: str, related_id: str, webhook_url: str | None
) -> None:
    conn.execute(
        insert(events).values(
            id=event.id,
            account_id=account_id,
            livemode=event.livemode,
            type=event.type.value,
            related_id=related_id,
            payload=orjson.dumps(event.envelope()).decode(),
            webhook_url=webhook_url,
            delivery_status=DeliveryStatus.PENDING if webhook_url else DeliveryStatus.NONE,
            created_at=event.created_at,
        )
    )
