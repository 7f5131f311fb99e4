"""SQL for idempotency keys. A key is taken by one INSERT, with its answer when the
unit knows it, in the transaction of its request's change; it loses to the unique
constraint while another request's record lives. Every later write is conditional
on the holder's lease."""

from __future__ import annotations

from datetime import datetime

from relay.accounts.models import Scope
from relay.db.sql import Row, Sql, Tx, document, json_text, moment
from relay.idempotency.models import KeyRecord, KeyStatus, StoredResponse

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_STATUS_OF: dict[str, KeyStatus] = {member.value: member for member in KeyStatus}
# An enum's `.value` is a Python property: read once.
_IN_PROGRESS, _DONE = KeyStatus.IN_PROGRESS.value, KeyStatus.DONE.value

_KEY = "account_id = :account AND livemode = :livemode AND key = :key"
# The holder's token is its lease's end: a write after the lease was taken over matches nothing.
_HELD = f"{_KEY} AND status = 'in_progress' AND locked_until = :locked_until"
_VALUES = (
    " (account_id, livemode, key, request_hash, status, resource_path, response_status,"
    " response_headers, response_body, locked_until, created_at) VALUES (:account, :livemode,"
    " :key, :request_hash, :status, :resource_path, :response_status, :headers, :body,"
    " :locked_until, :now)"
)
_REPLACE = (
    " ON CONFLICT (account_id, livemode, key) DO UPDATE SET status = excluded.status,"
    " request_hash = excluded.request_hash, resource_path = excluded.resource_path,"
    " response_status = excluded.response_status,"
    " response_headers = excluded.response_headers, response_body = excluded.response_body,"
    " locked_until = excluded.locked_until, created_at = excluded.created_at"
)
_STALE = "idempotency_keys.created_at <= :stale_before"
# The key with its request's change: a fresh key, or one past its 24 hours, is taken;
# a live record of another request (or of this one's first try) is left as it is and
# nothing is returned. On PostgreSQL a record another transaction is writing is waited
# for (the unique index), so a concurrent duplicate sees the first one's outcome.
_CLAIM = Sql(f"INSERT INTO idempotency_keys{_VALUES}{_REPLACE} WHERE {_STALE} RETURNING id")
_COLUMNS = (
    "request_hash, status, resource_path, locked_until, created_at, response_status,"
    " response_headers, response_body"
)
_LOAD = Sql(f"SELECT {_COLUMNS} FROM idempotency_keys WHERE {_KEY}")
# The answer, kept for replays once it is known after the change's unit: over the
# holder's own claim, or as a new record when the request changed nothing (a 404), or
# over a record past its 24 hours.
_STORE = Sql(
    f"INSERT INTO idempotency_keys{_VALUES}{_REPLACE}"
    " WHERE (idempotency_keys.status = 'in_progress'"
    " AND idempotency_keys.locked_until = :locked_until) OR " + _STALE
)
# A claimed request that answered with an error not kept (a 5xx): its change committed,
# so the next try is answered with the resource at once, not after the lease.
_LET_GO = Sql(f"UPDATE idempotency_keys SET locked_until = :now WHERE {_HELD}")
_PRUNE = Sql("DELETE FROM idempotency_keys WHERE created_at <= :before")


def _params(
    scope: Scope,
    key: str,
    *,
    request_hash: str,
    locked_until: datetime,
    response: StoredResponse | None,
    resource_path: str | None,
    now: datetime,
    stale_before: datetime,
) -> dict[str, object]:
    return {
        "account": scope.account_id,
        "livemode": scope.livemode,
        "key": key,
        "request_hash": request_hash,
        "status": _IN_PROGRESS if response is None else _DONE,
        "resource_path": resource_path,
        "response_status": None if response is None else response.status,
        # As `bind` writes a list of pairs.
        "headers": None if response is None else json_text(response.headers),
        "body": None if response is None else response.body,
        "locked_until": locked_until,
        "now": now,
        "stale_before": stale_before,
    }


async def claim(
    tx: Tx,
    scope: Scope,
    key: str,
    *,
    request_hash: str,
    resource_path: str,
    locked_until: datetime,
    response: StoredResponse | None,
    now: datetime,
    stale_before: datetime,
) -> bool:
    """Take the key for the change this unit makes (done, with `response`, when the unit
    knows its answer); False if another live record holds it."""
    params = _params(
        scope,
        key,
        request_hash=request_hash,
        locked_until=locked_until,
        response=response,
        resource_path=resource_path,
        now=now,
        stale_before=stale_before,
    )
    return await tx.fetchrow(_CLAIM, params) is not None


def _record(row: Row) -> KeyRecord:
    response = None
    if row["response_status"] is not None:
        headers = tuple((str(name), str(text)) for name, text in document(row["response_headers"]))
        response = StoredResponse(row["response_status"], headers, bytes(row["response_body"]))
    return KeyRecord(
        request_hash=row["request_hash"],
        status=_STATUS_OF[row["status"]],
        locked_until=moment(row["locked_until"]),
        created_at=moment(row["created_at"]),
        response=response,
        resource_path=row["resource_path"],
    )


async def load(tx: Tx, scope: Scope, key: str) -> KeyRecord | None:
    params = {"account": scope.account_id, "livemode": scope.livemode, "key": key}
    row = await tx.fetchrow(_LOAD, params)
    return None if row is None else _record(row)


async def store_answer(
    tx: Tx,
    scope: Scope,
    key: str,
    *,
    request_hash: str,
    locked_until: datetime,
    response: StoredResponse,
    resource_path: str | None,
    now: datetime,
    stale_before: datetime,
) -> bool:
    """Keep the answer, unless another request holds the key; False then."""
    params = _params(
        scope,
        key,
        request_hash=request_hash,
        locked_until=locked_until,
        response=response,
        resource_path=resource_path,
        now=now,
        stale_before=stale_before,
    )
    return await tx.execute(_STORE, params) == 1


async def let_go(tx: Tx, scope: Scope, key: str, *, locked_until: datetime, now: datetime) -> None:
    params = {
        "account": scope.account_id,
        "livemode": scope.livemode,
        "key": key,
        "locked_until": locked_until,
        "now": now,
    }
    await tx.execute(_LET_GO, params)


async def prune(tx: Tx, *, before: datetime) -> int:
    return await tx.execute(_PRUNE, {"before": before})
