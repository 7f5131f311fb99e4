"""Replaying one webhook delivery at an operator's request (the console's action).

Only a delivery that is not pending can be replayed: a pending one belongs to
the delivery loop, whose attempt numbers are its claims. A replay is sent at
once with the account's current secrets, recorded as the event's next attempt
number (the unique index refuses a second replay racing for the same number),
and a successful one marks a dropped delivery delivered.
"""

from __future__ import annotations

from relay.accounts.models import Scope
from relay.db.sql import IntegrityViolation, Sql, Tx
from relay.errors import InvalidRequest, ResourceMissing
from relay.events.service import EventService
from relay.events.store import AttemptRecord, insert_attempt
from relay.webhooks.signature import HEADER, sign
from relay.webhooks.transport import WebhookClient

_EVENT = Sql(
    "SELECT id, payload, webhook_url, delivery_status FROM events"
    " WHERE id = :id AND account_id = :scope_account AND livemode = :scope_livemode"
)
_NEXT_NUMBER = Sql(
    "SELECT COALESCE(MAX(number), 0) + 1 AS n FROM webhook_attempts WHERE event_id = :id"
)
_DELIVERED = Sql(
    "UPDATE events SET delivery_status = 'delivered', next_attempt_at = NULL"
    " WHERE id = :id AND delivery_status = 'dropped'"
)


async def replay(events: EventService, scope: Scope, event_id: str) -> AttemptRecord:
    row = await events.db.read(lambda tx: tx.fetchrow(_EVENT, {**scope.params(), "id": event_id}))
    if row is None:
        raise ResourceMissing(f"No such event: {event_id}", param="id")
    if row["webhook_url"] is None:
        raise InvalidRequest("This event has no webhook_url: there is nothing to replay.")
    if row["delivery_status"] == "pending":
        raise InvalidRequest("This delivery is still being retried; wait for it to finish.")
    # The event was read within the scope's mode: its own mode's secrets sign it.
    secrets = await events.signing_secrets(scope.account_id, livemode=scope.livemode)
    payload = str(row["payload"]).encode()
    at = events.now()
    if not secrets:
        record = AttemptRecord(at, None, "no_signing_secret", 0)
    else:
        headers = {
            "Content-Type": "application/json",
            HEADER: sign(payload, secrets, timestamp=int(events.now().timestamp())),
        }
        settings = events.delivery
        client = WebhookClient(
            timeout=settings.timeout,
            allowed_networks=settings.allowed_networks,
            ca_bundle=settings.ca_bundle,
            concurrency=1,
        )
        try:
            result = await client.post(row["webhook_url"], payload, headers)
        finally:
            await client.aclose()
        record = AttemptRecord(
            at, result.status_code, result.error, result.duration_ms, result.excerpt
        )
    ok = record.error is None and record.status_code is not None

    async def keep(tx: Tx) -> None:
        found = await tx.fetchrow(_NEXT_NUMBER, {"id": event_id})
        assert found is not None
        await insert_attempt(tx, event_id, int(found["n"]), record)
        if ok:
            await tx.execute(_DELIVERED, {"id": event_id})

    try:
        await events.db.write(keep)
    except IntegrityViolation:
        raise InvalidRequest("Another replay of this delivery was recorded first.") from None
    return record
