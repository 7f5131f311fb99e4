"""The events a verification records about itself, in the transaction that changes it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from relay.accounts.models import Scope
from relay.db.sql import Tx
from relay.events import store as event_store
from relay.events.models import EventType
from relay.verifications import store
from relay.verifications.models import Verification, shown_json


async def record(
    tx: Tx,
    verification: Verification,
    kind: EventType,
    now: datetime,
    *,
    payload: dict[str, Any] | None = None,
) -> None:
    """`payload`: the verification as the event shows it, when not as it stands now."""
    data = shown_json(verification, now) if payload is None else payload
    await event_store.record_about(tx, verification, kind, now=now, data_object=data)


async def record_now(
    tx: Tx, scope: Scope, verification_id: str, kind: EventType, now: datetime
) -> Verification:
    """Record `kind` about the verification as it now stands, and return it."""
    verification = await store.require(tx, scope, verification_id)
    await record(tx, verification, kind, now)
    return verification
