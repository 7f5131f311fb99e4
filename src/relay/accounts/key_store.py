"""SQL for API keys: create, list, roll, restrict, revoke, and the lookup of every request."""

from __future__ import annotations

from datetime import datetime

from relay.accounts.access import FoundKey
from relay.accounts.models import ApiKey, Caller, key_state
from relay.db.limits import column_length
from relay.db.sql import Row, Sql, Tx, document, flag, moment, moment_or_none

_KEY_COLUMNS = (
    "id, account_id, livemode, last4, created_at, revoked_at, expires_at, networks,"
    " last_used_at, last_refused_at, last_refused_reason"
)

# Keys that still answer: a rolling key counts until its overlap ends.
_UNEXPIRED_KEY_COUNT = Sql(
    "SELECT count(*) AS n FROM api_keys"
    " WHERE account_id = :account AND livemode = :livemode AND revoked_at IS NULL"
    " AND (expires_at IS NULL OR expires_at > :now)"
)
_INSERT_KEY = Sql(
    "INSERT INTO api_keys (id, account_id, livemode, key_hash, last4, created_at, networks)"
    " VALUES (:id, :account, :livemode, :key_hash, :last4, :now, :networks)"
    f" RETURNING {_KEY_COLUMNS}"
)
_KEY = Sql(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = :id")
_ALL_KEYS = Sql(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY account_id, id")
_ACCOUNT_KEYS = Sql(
    f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = :account ORDER BY account_id, id"
)
_REVOKE_KEY = Sql(
    "UPDATE api_keys SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL"
    f" RETURNING {_KEY_COLUMNS}"
)
# One statement decides the race between two rolls of one key: only an active key rolls.
_START_ROLL = Sql(
    "UPDATE api_keys SET expires_at = :at"
    " WHERE id = :id AND revoked_at IS NULL AND expires_at IS NULL"
    f" RETURNING {_KEY_COLUMNS}"
)
_RESTRICT_KEY = Sql(
    "UPDATE api_keys SET networks = :networks WHERE id = :id AND revoked_at IS NULL"
    " AND (expires_at IS NULL OR expires_at > :now)"
    f" RETURNING {_KEY_COLUMNS}"
)
# The read of a key this process does not keep (`key_cache`), by the key's unique hash.
# The raw key never reaches SQL: it is found by its SHA-256, so timing reveals nothing
# about how much of a guess matched. Revoked and expired keys are read too, so that
# their refusal can be noted (and kept: a revocation is for good).
_FOUND_KEY_COLUMNS = (
    "k.id AS key_id, k.account_id AS key_account_id, k.livemode AS key_livemode,"
    " k.revoked_at AS key_revoked_at, k.expires_at AS key_expires_at,"
    " k.networks AS key_networks, ka.brand AS account_brand,"
    " ka.webotp_domain AS account_webotp_domain,"
    " ka.allowed_countries AS account_allowed_countries,"
    " EXISTS (SELECT 1 FROM account_templates kt WHERE kt.account_id = ka.id)"
    " AS account_has_templates"
)
_FIND_KEY = Sql(
    f"SELECT {_FOUND_KEY_COLUMNS} FROM api_keys k JOIN accounts ka ON ka.id = k.account_id"
    " WHERE k.key_hash = :hash"
)
_NOTE_USE = Sql("UPDATE api_keys SET last_used_at = :now WHERE id = :id")
_NOTE_REFUSAL = Sql(
    "UPDATE api_keys SET last_refused_at = :now, last_refused_reason = :reason WHERE id = :id"
)


async def unexpired_key_count(tx: Tx, account_id: str, *, livemode: bool, now: datetime) -> int:
    params = {"account": account_id, "livemode": livemode, "now": now}
    row = await tx.fetchrow(_UNEXPIRED_KEY_COUNT, params)
    assert row is not None
    return int(row["n"])


async def insert_key(
    tx: Tx,
    *,
    key_id: str,
    account_id: str,
    livemode: bool,
    key_hash: str,
    last4: str,
    now: datetime,
    networks: list[str] | None = None,
) -> ApiKey:
    """The key as stored (RETURNING: no second read)."""
    params = {
        "id": key_id,
        "account": account_id,
        "livemode": livemode,
        "key_hash": key_hash,
        "last4": last4,
        "now": now,
        "networks": networks,
    }
    row = await tx.fetchrow(_INSERT_KEY, params)
    assert row is not None
    return _key_from_row(row, now)


def _networks(value: object) -> tuple[str, ...] | None:
    # JSON `null` and SQL NULL both mean anywhere.
    found = document(value)
    return None if found is None else tuple(found)


def _key_from_row(row: Row, now: datetime) -> ApiKey:
    revoked_at = moment_or_none(row["revoked_at"])
    expires_at = moment_or_none(row["expires_at"])
    return ApiKey(
        id=row["id"],
        account_id=row["account_id"],
        livemode=flag(row["livemode"]),
        last4=row["last4"],
        created_at=moment(row["created_at"]),
        revoked_at=revoked_at,
        expires_at=expires_at,
        networks=_networks(row["networks"]),
        last_used_at=moment_or_none(row["last_used_at"]),
        last_refused_at=moment_or_none(row["last_refused_at"]),
        last_refused_reason=row["last_refused_reason"],
        state=key_state(revoked_at, expires_at, now),
    )


async def key(tx: Tx, key_id: str, *, now: datetime) -> ApiKey | None:
    row = await tx.fetchrow(_KEY, {"id": key_id})
    return None if row is None else _key_from_row(row, now)


async def list_keys(tx: Tx, account_id: str | None, *, now: datetime) -> list[ApiKey]:
    if account_id is None:
        rows = await tx.fetch(_ALL_KEYS)
    else:
        rows = await tx.fetch(_ACCOUNT_KEYS, {"account": account_id})
    return [_key_from_row(row, now) for row in rows]


async def revoke_key(tx: Tx, key_id: str, *, now: datetime) -> ApiKey | None:
    row = await tx.fetchrow(_REVOKE_KEY, {"id": key_id, "now": now})
    return None if row is None else _key_from_row(row, now)


async def start_roll(tx: Tx, key_id: str, *, ends: datetime, now: datetime) -> ApiKey | None:
    """The key, now ending at `ends`; None unless it was active (not revoked nor rolling)."""
    row = await tx.fetchrow(_START_ROLL, {"id": key_id, "at": ends})
    return None if row is None else _key_from_row(row, now)


async def restrict_key(
    tx: Tx, key_id: str, networks: list[str] | None, *, now: datetime
) -> ApiKey | None:
    row = await tx.fetchrow(_RESTRICT_KEY, {"id": key_id, "networks": networks, "now": now})
    return None if row is None else _key_from_row(row, now)


async def find_key(tx: Tx, key_hash: str) -> FoundKey | None:
    row = await tx.fetchrow(_FIND_KEY, {"hash": key_hash})
    return None if row is None else _found_key(row)


def _found_key(row: Row) -> FoundKey:
    allowed = document(row["account_allowed_countries"])
    caller = Caller(
        account_id=row["key_account_id"],
        brand=row["account_brand"],
        webotp_domain=row["account_webotp_domain"],
        livemode=flag(row["key_livemode"]),
        key_id=row["key_id"],
        allowed_countries=None if allowed is None else frozenset(allowed),
        has_templates=flag(row["account_has_templates"]),
    )
    return FoundKey(
        caller=caller,
        revoked_at=moment_or_none(row["key_revoked_at"]),
        expires_at=moment_or_none(row["key_expires_at"]),
        networks=_networks(row["key_networks"]),
    )


async def note_use(tx: Tx, key_id: str, *, now: datetime) -> None:
    await tx.execute(_NOTE_USE, {"id": key_id, "now": now})


async def note_refusal(tx: Tx, key_id: str, reason: str, *, now: datetime) -> None:
    # A reason naming 50 ranges is longer than its column: the start says enough.
    kept = reason[: column_length("api_keys", "last_refused_reason")]
    await tx.execute(_NOTE_REFUSAL, {"id": key_id, "now": now, "reason": kept})


# What the known-keys gate admits (`accounts.known_keys`): read at most once a second.
_VALID_KEY_HASHES = Sql(
    "SELECT key_hash FROM api_keys"
    " WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now)"
)


async def valid_key_hashes(tx: Tx, *, now: datetime) -> list[str]:
    """The hash of every key that is neither revoked nor past its roll at `now`."""
    return [str(row["key_hash"]) for row in await tx.fetch(_VALID_KEY_HASHES, {"now": now})]
