"""The events a verification records about itself, in the transaction that changes it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from relay.db.sql import Tx
from relay.events import store as event_store
from relay.events.models import EventType
from relay.verifications.models import Verification


async def record(
    tx: Tx,
    verification: Verification,
    kind: EventType,
    now: datetime,
    *,
    payload: dict[str, Any] | None = None,
) -> None:
    """`payload`: the verification as the event shows it, when not as it stands now."""
    data = verification.to_api(now) if payload is None else payload
    await event_store.record_about(tx, verification, kind, now=now, data_object=data)
