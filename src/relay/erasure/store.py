"""SQL of erasure: the rows that name a destination, counted and deleted.

A verification or message names its destination in `to_number` (an E.164 number, or an
email address's mailbox); its attempts, events, webhook attempts and stored idempotent
answers go with it through `relay.retention.store.remove`, which keeps their figures
first. The per-number limits' counters and blocks name it as their subject.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.db.sql import Sql, Tx
from relay.retention import rollup
from relay.retention.store import OWNER_PATH

# Whose rows: one account in one mode (an API key), one account (the CLI's --account),
# one mode of every account (an admin console view), or every account.
_FILTERS = {
    "all": "to_number = :to",
    "mode": "livemode = :livemode AND to_number = :to",
    "account": "account_id = :account AND to_number = :to",
    "scope": "account_id = :account AND livemode = :livemode AND to_number = :to",
}


def _variant(account_id: str | None, livemode: bool | None) -> str:
    if account_id is None:
        return "all" if livemode is None else "mode"
    return "account" if livemode is None else "scope"


def _owners(table: str) -> dict[str, Sql]:
    statements = {}
    for name, where in _FILTERS.items():
        text = f"SELECT id, account_id FROM {table} WHERE {where} ORDER BY id"
        # Locked on PostgreSQL: a check, a resend or the dispatcher waits for the
        # erasure, then finds nothing.
        statements[name] = Sql(text, postgres=text + " FOR UPDATE")
    return statements


_VERIFICATIONS = _owners("verifications")
_MESSAGES = _owners("messages")

_COUNT = {
    "attempts": "SELECT COUNT(*) AS n FROM attempts WHERE {owner} IN {{ids}}",
    "events": "SELECT COUNT(*) AS n FROM events WHERE account_id = :account"
    " AND livemode IN (FALSE, TRUE) AND related_id IN {{ids}}",
    "webhook_attempts": "SELECT COUNT(*) AS n FROM webhook_attempts WHERE event_id IN"
    " (SELECT id FROM events WHERE account_id = :account AND livemode IN (FALSE, TRUE)"
    " AND related_id IN {{ids}})",
    "idempotency_keys": "SELECT COUNT(*) AS n FROM idempotency_keys WHERE account_id = :account"
    " AND resource_path IN (SELECT CAST(:prefix AS TEXT) || value FROM {{values}})",
}


def _counts(owner: str) -> dict[str, Sql]:
    return {kind: rollup.both_ids(text.format(owner=owner)) for kind, text in _COUNT.items()}


_OWNED_COUNTS = {False: _counts("verification_id"), True: _counts("message_id")}

_SENT = {
    messages: rollup.both_ids(
        f"SELECT carrier, carrier_message_id FROM attempts WHERE {owner} IN {{ids}}"
        " AND carrier_message_id IS NOT NULL"
    )
    for messages, owner in ((False, "verification_id"), (True, "message_id"))
}

# The per-number limits' rows: only kind `number` names a destination (a prefix, a
# country and an account are shared by many).
_LIMIT_TABLES = ("abuse_counters", "destination_blocks")
_LIMITS_WHERE = {
    "all": "kind = 'number' AND subject = :to",
    "mode": "livemode = :livemode AND kind = 'number' AND subject = :to",
    "account": "account_id = :account AND kind = 'number' AND subject = :to",
    "scope": "account_id = :account AND livemode = :livemode AND kind = 'number' AND subject = :to",
}
_LIMIT_COUNTS = {
    name: Sql(
        " UNION ALL ".join(
            f"SELECT COUNT(*) AS n FROM {table} WHERE {where}" for table in _LIMIT_TABLES
        )
    )
    for name, where in _LIMITS_WHERE.items()
}
_LIMIT_DELETES = {
    name: [Sql(f"DELETE FROM {table} WHERE {where}") for table in _LIMIT_TABLES]
    for name, where in _LIMITS_WHERE.items()
}


@dataclass(frozen=True)
class Found:
    """What names a destination, per account: verification and message ids."""

    verifications: Mapping[str, list[str]]
    messages: Mapping[str, list[str]]


def _params(to: str, account_id: str | None, livemode: bool | None) -> dict[str, Any]:
    params: dict[str, Any] = {"to": to}
    if account_id is not None:
        params["account"] = account_id
    if livemode is not None:
        params["livemode"] = livemode
    return params


async def find(tx: Tx, to: str, *, account_id: str | None, livemode: bool | None) -> Found:
    """The verifications and messages whose destination is `to`, by account."""
    variant = _variant(account_id, livemode)
    params = _params(to, account_id, livemode)
    found: list[dict[str, list[str]]] = []
    for statements in (_VERIFICATIONS, _MESSAGES):
        by_account: dict[str, list[str]] = {}
        for row in await tx.fetch(statements[variant], params):
            by_account.setdefault(row["account_id"], []).append(row["id"])
        found.append(by_account)
    return Found(verifications=found[0], messages=found[1])


async def count(
    tx: Tx, found: Found, to: str, *, account_id: str | None, livemode: bool | None
) -> dict[str, int]:
    """How many rows of each kind an erasure of `found` deletes."""
    counts = {
        "verifications": sum(map(len, found.verifications.values())),
        "messages": sum(map(len, found.messages.values())),
        **dict.fromkeys(_COUNT, 0),
    }
    for messages, owners in ((False, found.verifications), (True, found.messages)):
        for owner_account, ids in owners.items():
            params = {"account": owner_account, "ids": ids, "prefix": OWNER_PATH[messages]}
            for kind, statement in _OWNED_COUNTS[messages].items():
                row = await tx.fetchrow(statement, params)
                counts[kind] += 0 if row is None else int(row["n"])
    variant = _variant(account_id, livemode)
    rows = await tx.fetch(_LIMIT_COUNTS[variant], _params(to, account_id, livemode))
    counts["counters"] = sum(int(row["n"]) for row in rows)
    return counts


async def carrier_ids(tx: Tx, *, messages: bool, ids: list[str]) -> list[tuple[str, str]]:
    """The carrier and message id of each of these owners' attempts a carrier took."""
    rows = await tx.fetch(_SENT[messages], {"ids": ids})
    return [(row["carrier"], row["carrier_message_id"]) for row in rows]


async def delete_limits(tx: Tx, to: str, *, account_id: str | None, livemode: bool | None) -> None:
    """The per-number limits' counters and blocks whose subject is `to`."""
    params = _params(to, account_id, livemode)
    for statement in _LIMIT_DELETES[_variant(account_id, livemode)]:
        await tx.execute(statement, params)
