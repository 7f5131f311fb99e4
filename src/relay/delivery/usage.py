"""Usage counters: one row per account, day, country, carrier and outcome of live sends."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import Connection, func, select
from sqlalchemy.dialects import postgresql, sqlite

from relay.db.prepared import Prepared
from relay.db.tables import usage

U = usage.c


def count(
    conn: Connection, *, account_id: str, day: str, country: str, carrier: str, outcome: str
) -> None:
    """One more live send with this outcome: a single upsert, safe under concurrency."""
    key = {
        "account_id": account_id,
        "day": day,
        "country": country,
        "carrier": carrier,
        "outcome": outcome,
    }
    _count_usage_statement(conn.dialect.name).execute(conn, {**key, "count": 1})


_USAGE_KEY = ["account_id", "day", "country", "carrier", "outcome"]


@functools.cache
def _count_usage_statement(dialect: str) -> Prepared:
    """Built once per database kind: it runs for every live attempt that ends."""
    statement = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(usage)
    return Prepared(
        statement.on_conflict_do_update(index_elements=_USAGE_KEY, set_={"count": U.count + 1})
    )


@dataclass(frozen=True)
class UsageRow:
    account_id: str
    day: str
    country: str
    carrier: str
    outcome: str
    count: int


def usage_rows(
    conn: Connection, *, account_id: str | None = None, since: str | None = None
) -> list[UsageRow]:
    query = select(U.account_id, U.day, U.country, U.carrier, U.outcome, U.count)
    if account_id is not None:
        query = query.where(U.account_id == account_id)
    if since is not None:
        query = query.where(U.day >= since)
    query = query.order_by(U.account_id, U.day, U.country, U.carrier, U.outcome)
    return [UsageRow(*r) for r in conn.execute(query)]


def usage_totals(conn: Connection, *, account_id: str) -> dict[str, int]:
    """Outcome → count, all days: for tests and the usage summary line."""
    query = (
        select(U.outcome, func.sum(U.count)).where(U.account_id == account_id).group_by(U.outcome)
    )
    return {outcome: int(total) for outcome, total in conn.execute(query)}
