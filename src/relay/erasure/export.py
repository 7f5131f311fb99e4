"""Export: every record Relay holds that names one destination, as JSON-ready dicts,
without codes or secrets (no `code_mac`, no `sealed_code`: the columns are never read).

The same rows an erasure deletes (relay.erasure.store), each as `{"kind": ..., ...}`
with times in the API's ISO 8601 form and JSON columns decoded (a limit's own `kind`
column is `limit_kind`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from relay.clock import isoformat
from relay.db.driver import Db
from relay.db.sql import Row, Sql, Tx, document, flag, moment
from relay.erasure.models import destination_key
from relay.retention import rollup


class Kind:
    """One kind of record: its statement, and how its columns read."""

    def __init__(
        self,
        name: str,
        statement: Sql,
        *,
        times: Iterable[str] = (),
        documents: Iterable[str] = (),
        flags: Iterable[str] = ("livemode",),
        texts: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.statement = statement
        self.times = frozenset(times)
        self.documents = frozenset(documents)
        self.flags = frozenset(flags)
        self.texts = frozenset(texts)
        # The columns the statement names, as its rows are read by name.
        listed = statement.text.removeprefix("SELECT ").split(" FROM ")[0]
        self.columns = tuple(
            name.split(" AS ")[-1].strip().rpartition(".")[2] for name in listed.split(",")
        )

    def record(self, row: Row) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.name}
        for column in self.columns:
            value = row[column]
            if value is None:
                out[column] = None
            elif column in self.times:
                out[column] = isoformat(moment(value))
            elif column in self.documents:
                out[column] = document(value)
            elif column in self.flags:
                out[column] = flag(value)
            elif column in self.texts:
                out[column] = bytes(value).decode("utf-8", "replace")
            else:
                out[column] = value
        return out


_OWNER_SCOPE = {
    "all": "to_number = :to",
    "account": "account_id = :account AND to_number = :to",
}
_VERIFICATION_COLUMNS = (
    "id, account_id, livemode, to_number, address, country, sender, locale, code_length,"
    " channels, status, checks, sends, metadata, webhook_url, created_at, updated_at,"
    " expires_at, last_sent_at, approved_at, canceled_at"
)
_MESSAGE_COLUMNS = (
    "id, account_id, livemode, to_number, country, sender, locale, status, metadata,"
    " webhook_url, created_at, updated_at, expires_at"
)


_SELECT = "SELECT {columns} FROM {table} WHERE {where} ORDER BY id"


def _owners(name: str, table: str, columns: str, times: Iterable[str]) -> dict[str, Kind]:
    return {
        variant: Kind(
            name,
            Sql(_SELECT.format(columns=columns, table=table, where=where)),
            times=times,
            documents=("metadata",),
        )
        for variant, where in _OWNER_SCOPE.items()
    }


_VERIFICATIONS = _owners(
    "verification",
    "verifications",
    _VERIFICATION_COLUMNS,
    ("created_at", "updated_at", "expires_at", "last_sent_at", "approved_at", "canceled_at"),
)
_MESSAGES = _owners(
    "message", "messages", _MESSAGE_COLUMNS, ("created_at", "updated_at", "expires_at")
)

# Of one account's verifications and messages, `ids` (ids are unique across both).
_OWNED = (
    Kind(
        "attempt",
        rollup.both_ids(
            "SELECT id, verification_id, message_id, carrier, channel, status, error,"
            " carrier_message_id, position, route, route_channels, segments, at, updated_at,"
            " report_due_at FROM attempts"
            " WHERE verification_id IN {ids} OR message_id IN {ids} ORDER BY id"
        ),
        times=("at", "updated_at", "report_due_at"),
        documents=("error", "route", "route_channels"),
        flags=(),
    ),
    Kind(
        "event",
        rollup.both_ids(
            "SELECT id, account_id, livemode, type, related_id, payload, webhook_url,"
            " delivery_status, attempt_count, created_at FROM events WHERE account_id = :account"
            " AND livemode IN (FALSE, TRUE) AND related_id IN {ids} ORDER BY id"
        ),
        times=("created_at",),
        documents=("payload",),
    ),
    Kind(
        "webhook_attempt",
        rollup.both_ids(
            "SELECT w.id, w.event_id, w.number, w.at, w.status_code, w.error, w.duration_ms,"
            " w.response_excerpt FROM webhook_attempts w JOIN events e ON e.id = w.event_id"
            " WHERE e.account_id = :account AND e.livemode IN (FALSE, TRUE)"
            " AND e.related_id IN {ids} ORDER BY w.id"
        ),
        times=("at",),
        flags=(),
    ),
    Kind(
        "idempotency_key",
        rollup.both_ids(
            "SELECT id, account_id, livemode, key, status, resource_path, response_status,"
            " response_body, created_at FROM idempotency_keys WHERE account_id = :account"
            " AND (resource_path IN (SELECT '/v1/verifications/' || value FROM {values})"
            " OR resource_path IN (SELECT '/v1/messages/' || value FROM {values}))"
            " ORDER BY id"
        ),
        times=("created_at",),
        texts=("response_body",),
    ),
)

_COUNTERS = (
    "SELECT account_id, livemode, kind AS limit_kind, subject, bucket, shard, sends, approvals,"
    " failed_checks FROM abuse_counters WHERE {where}"
    " ORDER BY account_id, livemode, bucket, shard"
)
_BLOCKS = (
    "SELECT account_id, livemode, kind AS limit_kind, subject, blocked_until, created_at"
    " FROM destination_blocks WHERE {where} ORDER BY account_id, livemode"
)
_LIMITS = {
    variant: (
        Kind(
            "counter",
            Sql(_COUNTERS.format(where=where)),
            times=("bucket",),
        ),
        Kind(
            "block",
            Sql(_BLOCKS.format(where=where)),
            times=("blocked_until", "created_at"),
        ),
    )
    for variant, where in (
        ("all", "kind = 'number' AND subject = :to"),
        ("account", "account_id = :account AND kind = 'number' AND subject = :to"),
    )
}


async def export(db: Db, to: str, *, account_id: str | None) -> list[dict[str, Any]]:
    """Every record naming `to` (of one account, or of all), owners first."""
    key = destination_key(to)

    async def unit(tx: Tx) -> list[dict[str, Any]]:
        return await _records(tx, key, account_id)

    return await db.snapshot(unit)


async def _records(tx: Tx, key: str, account_id: str | None) -> list[dict[str, Any]]:
    variant = "all" if account_id is None else "account"
    params: dict[str, Any] = {"to": key}
    if account_id is not None:
        params["account"] = account_id
    records: list[dict[str, Any]] = []
    owned: dict[str, list[str]] = {}
    for kinds in (_VERIFICATIONS, _MESSAGES):
        for row in await tx.fetch(kinds[variant].statement, params):
            records.append(kinds[variant].record(row))
            owned.setdefault(row["account_id"], []).append(row["id"])
    for kind in _OWNED:
        for owner_account, ids in owned.items():
            rows = await tx.fetch(kind.statement, {"account": owner_account, "ids": ids})
            records.extend(kind.record(row) for row in rows)
    for kind in _LIMITS[variant]:
        records.extend(kind.record(row) for row in await tx.fetch(kind.statement, params))
    return records
