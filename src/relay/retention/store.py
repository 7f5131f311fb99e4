"""SQL of the retention prune: which rows are past their time, and their deletion.

A verification or message is due `delete_after` (its account's, else the setting's)
past its creation, once nothing is left to do for it: a pending verification, a
queued or sent message, an attempt still queued or awaiting its receipt, or an event
whose webhook is still being delivered keeps it for a later pass.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from relay.db.sql import Sql, Tx
from relay.retention import rollup

_ACCOUNTS = Sql("SELECT id, delete_after FROM accounts ORDER BY id")

_DUE = (
    "SELECT o.id FROM {table} o WHERE o.account_id = :account AND o.created_at < :cutoff"
    " AND {settled}"
    " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.{owner} = o.id"
    " AND a.status IN ('queued', 'sent'))"
    " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.account_id = o.account_id"
    " AND e.livemode = o.livemode AND e.related_id = o.id AND e.delivery_status = 'pending')"
    " ORDER BY o.id LIMIT :limit"
)
# On PostgreSQL, prunes in several processes (`relay worker`s, serve's workers) run at
# once: each locks the rows it takes and skips those another holds, so no batch is
# rolled up twice. SQLite's writer runs one unit at a time.
_LOCKED = " FOR UPDATE OF o SKIP LOCKED"


def _due(table: str, owner: str, settled: str) -> Sql:
    text = _DUE.format(table=table, owner=owner, settled=settled)
    return Sql(text, postgres=text + _LOCKED)


DUE_VERIFICATIONS = _due("verifications", "verification_id", "o.status <> 'pending'")
DUE_MESSAGES = _due("messages", "message_id", "o.status NOT IN ('queued', 'sent')")


def _deletes(table: str, owner: str) -> list[Sql]:
    ids = rollup.both_ids
    return [
        ids(
            "DELETE FROM webhook_attempts WHERE event_id IN (SELECT id FROM events"
            " WHERE account_id = :account AND livemode IN (FALSE, TRUE) AND related_id IN {ids})"
        ),
        ids(
            "DELETE FROM events WHERE account_id = :account AND livemode IN (FALSE, TRUE)"
            " AND related_id IN {ids}"
        ),
        ids(
            "DELETE FROM idempotency_keys WHERE account_id = :account"
            " AND resource_path IN (SELECT CAST(:prefix AS TEXT) || value FROM {values})"
        ),
        ids(f"DELETE FROM attempts WHERE {owner} IN {{ids}}"),
        ids(f"DELETE FROM {table} WHERE id IN {{ids}}"),
    ]


VERIFICATION_DELETES = _deletes("verifications", "verification_id")
MESSAGE_DELETES = _deletes("messages", "message_id")


async def accounts(tx: Tx) -> list[tuple[str, int | None]]:
    """Every account, with its own delete_after (None: the setting's)."""
    rows = await tx.fetch(_ACCOUNTS)
    return [(r["id"], None if r["delete_after"] is None else int(r["delete_after"])) for r in rows]


async def prune_batch(
    tx: Tx, *, messages: bool, account_id: str, cutoff: datetime, limit: int
) -> int:
    """Keep the figures of one batch of due rows, then delete them and what holds them."""
    due = DUE_MESSAGES if messages else DUE_VERIFICATIONS
    rows = await tx.fetch(due, {"account": account_id, "cutoff": cutoff, "limit": limit})
    if not rows:
        return 0
    await remove(tx, messages=messages, account_id=account_id, ids=[r["id"] for r in rows])
    return len(rows)


async def remove(tx: Tx, *, messages: bool, account_id: str, ids: list[str]) -> None:
    """Keep the figures of these verifications (or messages) of one account, then delete
    them with their attempts, events, webhook attempts and stored idempotent answers:
    what retention and erasure (relay.erasure) both delete."""
    if not ids:
        return
    params: dict[str, Any] = {
        "account": account_id,
        "ids": ids,
        "prefix": OWNER_PATH[messages],
    }
    for statement in rollup.MESSAGES if messages else rollup.VERIFICATIONS:
        await tx.execute(statement, params)
    for statement in MESSAGE_DELETES if messages else VERIFICATION_DELETES:
        await tx.execute(statement, params)


# The API path of a verification or message, before its id: what `resource_path` of the
# idempotency keys that created or changed it starts with.
OWNER_PATH = {False: "/v1/verifications/", True: "/v1/messages/"}
