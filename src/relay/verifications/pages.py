"""List pages of verifications: keyset pagination on the time-sortable id."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay.accounts.models import Scope
from relay.db.sql import Sql, Tx
from relay.delivery.joined import attempts_of
from relay.records import fast_init
from relay.verifications import store
from relay.verifications.models import Status, Verification


@fast_init
@dataclass(frozen=True)
class ListQuery:
    limit: int
    starting_after: str | None = None
    ending_before: str | None = None
    status: Status | None = None
    to: str | None = None
    created_gte: datetime | None = None
    created_lt: datetime | None = None


# One condition per filter, chosen by which filters a query uses; the
# statement for each combination is rendered once.
_FILTERS = {
    "to": "to_number = :to",
    "created_gte": "created_at >= :created_gte",
    "created_lt": "created_at < :created_lt",
    "pending": "status = 'pending' AND expires_at > :now",
    "expired": "(status = 'expired' OR (status = 'pending' AND expires_at <= :now))",
    "status": "status = :status",
    "starting_after": "id < :starting_after",
    "ending_before": "id > :ending_before",
}


@functools.cache
def _page_statement(filters: tuple[str, ...], backwards: bool) -> Sql:
    conditions = " AND ".join([store.SCOPED, *(_FILTERS[name] for name in filters)])
    order = "ASC" if backwards else "DESC"
    return Sql(
        f"SELECT {store.PUBLIC} FROM verifications WHERE {conditions}"
        f" ORDER BY id {order} LIMIT :limit"
    )


def _page_filters(query: ListQuery) -> tuple[tuple[str, ...], dict[str, Any]]:
    given = {
        "to": query.to,
        "created_gte": query.created_gte,
        "created_lt": query.created_lt,
        "starting_after": query.starting_after,
        "ending_before": query.ending_before,
    }
    params = {name: value for name, value in given.items() if value is not None}
    names = list(params)
    if query.status in (Status.PENDING, Status.EXPIRED):
        names.append(query.status.value)
    elif query.status is not None:
        names.append("status")
        params["status"] = query.status.value
    return tuple(names), params


async def list_page(
    tx: Tx, scope: Scope, query: ListQuery, *, now: datetime
) -> tuple[list[Verification], bool]:
    """Keyset pagination on the time-sortable id: page cost is independent of depth."""
    names, params = _page_filters(query)
    backwards = query.ending_before is not None
    if "pending" in names or "expired" in names:
        params["now"] = now
    statement = _page_statement(names, backwards)
    rows = await tx.fetch(statement, {**scope.params(), **params, "limit": query.limit + 1})
    has_more = len(rows) > query.limit
    rows = rows[: query.limit]
    if backwards:
        rows.reverse()
    grouped = await attempts_of(tx, [r["id"] for r in rows], livemode=scope.livemode)
    return [store.from_row(r, grouped[r["id"]]) for r in rows], has_more
