"""Usage counters: one row per account, day, country, carrier and outcome of live sends."""

from __future__ import annotations

from dataclasses import dataclass

from relay.db.sql import Sql, Tx

_COUNT = Sql(
    "INSERT INTO usage (account_id, day, country, carrier, outcome, count)"
    " VALUES (:account_id, :day, :country, :carrier, :outcome, 1)"
    " ON CONFLICT (account_id, day, country, carrier, outcome)"
    " DO UPDATE SET count = usage.count + 1"
)
_ROWS = (
    "SELECT account_id, day, country, carrier, outcome, count FROM usage"
    " WHERE ({account} IS NULL OR account_id = {account})"
    " AND ({since} IS NULL OR day >= {since})"
    " ORDER BY account_id, day, country, carrier, outcome"
)
_USAGE_ROWS = Sql(
    _ROWS.format(account=":account", since=":since"),
    # A parameter only compared with NULL has no type PostgreSQL can infer.
    postgres=_ROWS.format(account="CAST(:account AS text)", since="CAST(:since AS text)"),
)
_TOTALS = Sql(
    "SELECT outcome, sum(count) AS total FROM usage WHERE account_id = :account GROUP BY outcome"
)


async def count(
    tx: Tx, *, account_id: str, day: str, country: str, carrier: str, outcome: str
) -> None:
    """One more live send with this outcome: a single upsert, safe under concurrency."""
    key = {
        "account_id": account_id,
        "day": day,
        "country": country,
        "carrier": carrier,
        "outcome": outcome,
    }
    await tx.execute(_COUNT, key)


@dataclass(frozen=True)
class UsageRow:
    account_id: str
    day: str
    country: str
    carrier: str
    outcome: str
    count: int


async def usage_rows(
    tx: Tx, *, account_id: str | None = None, since: str | None = None
) -> list[UsageRow]:
    rows = await tx.fetch(_USAGE_ROWS, {"account": account_id, "since": since})
    return [
        UsageRow(
            r["account_id"], r["day"], r["country"], r["carrier"], r["outcome"], int(r["count"])
        )
        for r in rows
    ]


async def usage_totals(tx: Tx, *, account_id: str) -> dict[str, int]:
    """Outcome → count, all days: for tests and the usage summary line."""
    rows = await tx.fetch(_TOTALS, {"account": account_id})
    return {r["outcome"]: int(r["total"]) for r in rows}
