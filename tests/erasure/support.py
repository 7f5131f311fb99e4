"""What the erasure tests share: the rows that name a destination, counted as a reader of
the tables would, and the ways a test leaves such rows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx

from relay.accounts.models import NewAccount
from relay.db.sql import Sql, Tx
from relay.services import Services
from relay.web.app import RelayApp

NUMBER = "+14155550123"
OTHER = "+14155550199"
DELIVERED = "+15005550006"

# What names a destination, per kind, counted the way a reader of the tables would.
_OWNERS = (
    "SELECT id FROM verifications WHERE to_number = :to"
    " UNION ALL SELECT id FROM messages WHERE to_number = :to"
)
_NAMING = {
    "verifications": "SELECT count(*) AS n FROM verifications WHERE to_number = :to",
    "messages": "SELECT count(*) AS n FROM messages WHERE to_number = :to",
    "attempts": "SELECT count(*) AS n FROM attempts WHERE verification_id IN (OWNERS)"
    " OR message_id IN (OWNERS)",
    "events": "SELECT count(*) AS n FROM events WHERE related_id IN (OWNERS)",
    "webhook_attempts": "SELECT count(*) AS n FROM webhook_attempts WHERE event_id IN"
    " (SELECT id FROM events WHERE related_id IN (OWNERS))",
    "idempotency_keys": "SELECT count(*) AS n FROM idempotency_keys WHERE resource_path IN"
    " (SELECT '/v1/verifications/' || id FROM (OWNERS) o)"
    " OR resource_path IN (SELECT '/v1/messages/' || id FROM (OWNERS) o)",
    "counters": "SELECT (SELECT count(*) FROM abuse_counters WHERE kind = 'number'"
    " AND subject = :to) + (SELECT count(*) FROM destination_blocks WHERE kind = 'number'"
    " AND subject = :to) AS n",
}
NAMING = {kind: sql.replace("OWNERS", _OWNERS) for kind, sql in _NAMING.items()}


def client(app: RelayApp, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="https://relay.test",
        headers={"Authorization": f"Bearer {key}"},
    )


async def count(services: Services, sql: str, **params: Any) -> int:
    async def read(tx: Tx) -> int:
        row = await tx.fetchrow(Sql(sql), params)
        assert row is not None
        return int(row["n"])

    return await services.db.read(read)


async def naming(services: Services, to: str) -> dict[str, int]:
    return {kind: await count(services, sql, to=to) for kind, sql in NAMING.items()}


async def post(api: httpx.AsyncClient, path: str, **body: Any) -> dict[str, Any]:
    answer = await api.post(path, json=body)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def dispatched(services: Services) -> None:
    """What the dispatcher of a serving process would do now: send every queued attempt."""
    for job in await services.delivery.claim(limit=10, busy=[]):
        await services.delivery.dispatch(job)


async def delivered_webhook(services: Services, verification_id: str) -> None:
    """A webhook delivery of the verification's first event, and a block of its number, as
    the webhook worker and the pumping guard leave them."""
    now = services.clock.now()

    async def write(tx: Tx) -> None:
        await tx.execute(
            Sql(
                "INSERT INTO webhook_attempts (event_id, number, at, status_code)"
                " SELECT MIN(id), 1, :now, 200 FROM events WHERE related_id = :id"
            ),
            {"id": verification_id, "now": now},
        )

    await services.db.write(write)


async def blocked(services: Services, account: NewAccount, to: str, *, livemode: bool) -> None:
    now = services.clock.now()

    async def write(tx: Tx) -> None:
        await tx.execute(
            Sql(
                "INSERT INTO destination_blocks (account_id, livemode, kind, subject,"
                " blocked_until, created_at) VALUES (:account, :livemode, 'number', :to, :until,"
                " :now)"
            ),
            {
                "account": account.id,
                "livemode": livemode,
                "to": to,
                "until": now + timedelta(hours=1),
                "now": now,
            },
        )

    await services.db.write(write)
