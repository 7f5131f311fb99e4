"""SQL for idempotency keys. A key is taken by an INSERT that may lose to the unique
constraint, in the transaction of its request's change; every later write is
conditional on the holder's lease."""

from __future__ import annotations

from datetime import datetime

from relay.accounts.models import Scope
from relay.db.sql import Row, Sql, Tx, document, moment
from relay.idempotency.models import KeyRecord, KeyStatus, StoredResponse

_KEY = "account_id = :account AND livemode = :livemode AND key = :key"
# The holder's token is its lease's end: a write after the lease was taken over matches nothing.
_HELD = f"{_KEY} AND status = 'in_progress' AND locked_until = :locked_until"

_INSERT = Sql(
    "INSERT INTO idempotency_keys (account_id, livemode, key, request_hash, status,"
    " resource_path, locked_until, created_at) VALUES (:account, :livemode, :key,"
    " :request_hash, 'in_progress', :resource_path, :locked_until, :now)"
    " ON CONFLICT DO NOTHING RETURNING id"
)
_COLUMNS = (
    "request_hash, status, resource_path, locked_until, created_at, response_status,"
    " response_headers, response_body"
)
_LOAD = Sql(f"SELECT {_COLUMNS} FROM idempotency_keys WHERE {_KEY}")
_HOLDS = Sql(f"SELECT id FROM idempotency_keys WHERE {_HELD} AND request_hash = :request_hash")
# The WHERE restates what was seen, so of two processes taking over at once only one matches.
_TAKE_OVER = Sql(
    "UPDATE idempotency_keys SET request_hash = :request_hash, status = 'in_progress',"
    " resource_path = :resource_path, response_status = NULL, response_headers = NULL,"
    " response_body = NULL, locked_until = :locked_until, created_at = :now"
    f" WHERE {_KEY} AND status = :seen_status AND locked_until = :seen_locked_until"
    " AND created_at = :seen_created_at"
)
# The answer, kept for replays: over the holder's own claim, or as a new record when the
# request changed nothing (a 404), or over a record past its 24 hours.
_STORE = Sql(
    "INSERT INTO idempotency_keys (account_id, livemode, key, request_hash, status,"
    " response_status, response_headers, response_body, locked_until, created_at)"
    " VALUES (:account, :livemode, :key, :request_hash, 'done', :status, :headers, :body,"
    " :locked_until, :now)"
    " ON CONFLICT (account_id, livemode, key) DO UPDATE SET status = 'done',"
    " request_hash = excluded.request_hash, response_status = excluded.response_status,"
    " response_headers = excluded.response_headers, response_body = excluded.response_body,"
    " locked_until = excluded.locked_until, created_at = excluded.created_at"
    " WHERE (idempotency_keys.status = 'in_progress'"
    " AND idempotency_keys.locked_until = :locked_until)"
    " OR idempotency_keys.created_at <= :stale_before"
)
# A claimed request that answered with an error not kept (a 5xx): its change committed,
# so the next try is answered with the resource at once, not after the lease.
_LET_GO = Sql(f"UPDATE idempotency_keys SET locked_until = :now WHERE {_HELD}")
_RELEASE = Sql(f"DELETE FROM idempotency_keys WHERE {_HELD} AND request_hash = :request_hash")
_PRUNE = Sql("DELETE FROM idempotency_keys WHERE created_at <= :before")


def _key(scope: Scope, key: str) -> dict[str, object]:
    return {"account": scope.account_id, "livemode": scope.livemode, "key": key}


async def try_insert(
    tx: Tx,
    scope: Scope,
    key: str,
    *,
    request_hash: str,
    resource_path: str,
    locked_until: datetime,
    now: datetime,
) -> bool:
    """Take a fresh key; False if the key exists (whoever holds it)."""
    params = {**_key(scope, key), "request_hash": request_hash, "resource_path": resource_path}
    row = await tx.fetchrow(_INSERT, {**params, "locked_until": locked_until, "now": now})
    return row is not None


async def holds(
    tx: Tx, scope: Scope, key: str, *, request_hash: str, locked_until: datetime
) -> bool:
    """Is the key already this request's (taken by an earlier unit of work of it)?"""
    params = {**_key(scope, key), "request_hash": request_hash, "locked_until": locked_until}
    return await tx.fetchrow(_HOLDS, params) is not None


def _record(row: Row) -> KeyRecord:
    response = None
    if row["response_status"] is not None:
        headers = tuple((str(name), str(text)) for name, text in document(row["response_headers"]))
        response = StoredResponse(row["response_status"], headers, bytes(row["response_body"]))
    return KeyRecord(
        request_hash=row["request_hash"],
        status=KeyStatus(row["status"]),
        locked_until=moment(row["locked_until"]),
        created_at=moment(row["created_at"]),
        response=response,
        resource_path=row["resource_path"],
    )


async def load(tx: Tx, scope: Scope, key: str) -> KeyRecord | None:
    row = await tx.fetchrow(_LOAD, _key(scope, key))
    return None if row is None else _record(row)


async def take_over(
    tx: Tx,
    scope: Scope,
    key: str,
    *,
    seen: KeyRecord,
    request_hash: str,
    resource_path: str,
    locked_until: datetime,
    now: datetime,
) -> bool:
    params = {
        **_key(scope, key),
        "request_hash": request_hash,
        "resource_path": resource_path,
        "locked_until": locked_until,
        "now": now,
        "seen_status": seen.status.value,
        "seen_locked_until": seen.locked_until,
        "seen_created_at": seen.created_at,
    }
    return await tx.execute(_TAKE_OVER, params) == 1


async def store_answer(
    tx: Tx,
    scope: Scope,
    key: str,
    *,
    request_hash: str,
    locked_until: datetime,
    response: StoredResponse,
    now: datetime,
    stale_before: datetime,
) -> bool:
    """Keep the answer, unless another request holds the key; False then."""
    params = {
        **_key(scope, key),
        "request_hash": request_hash,
        "locked_until": locked_until,
        "status": response.status,
        "headers": [list(pair) for pair in response.headers],
        "body": response.body,
        "now": now,
        "stale_before": stale_before,
    }
    return await tx.execute(_STORE, params) == 1


async def let_go(tx: Tx, scope: Scope, key: str, *, locked_until: datetime, now: datetime) -> None:
    await tx.execute(_LET_GO, {**_key(scope, key), "locked_until": locked_until, "now": now})


async def release(
    tx: Tx, scope: Scope, key: str, *, request_hash: str, locked_until: datetime
) -> None:
    params = {**_key(scope, key), "request_hash": request_hash, "locked_until": locked_until}
    await tx.execute(_RELEASE, params)


async def prune(tx: Tx, *, before: datetime) -> int:
    return await tx.execute(_PRUNE, {"before": before})
