"""Attempts as the API shows them, read with (or for) the verification or message they serve."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, select

from relay.db.tables import attempts
from relay.delivery.attempts import Attempt, AttemptStatus

A = attempts.c

# For loads that join an owner to its attempts in one statement (one owner,
# one round trip): the attempt's columns under names of their own.
JOINED_ATTEMPT_COLUMNS = (
    A.id.label("attempt_id"),
    A.status.label("attempt_status"),
    A.carrier.label("attempt_carrier"),
    A.at.label("attempt_at"),
    A.error.label("attempt_error"),
)
_ATTEMPTS_OF_VERIFICATIONS = (
    select(A.verification_id, *JOINED_ATTEMPT_COLUMNS)
    .where(A.verification_id.in_(bindparam("ids", expanding=True)))
    .order_by(A.verification_id, A.id)
)


def _joined_attempt(row: Any, livemode: bool) -> Attempt:
    return Attempt(
        id=row.attempt_id,
        status=AttemptStatus(row.attempt_status),
        carrier=row.attempt_carrier,
        at=row.attempt_at,
        error=row.attempt_error,
        livemode=livemode,
    )


def joined_attempts(rows: Sequence[Any], *, livemode: bool) -> list[Attempt]:
    """The attempts in rows selected with JOINED_ATTEMPT_COLUMNS (an outer join: none is NULL)."""
    return [_joined_attempt(row, livemode) for row in rows if row.attempt_id is not None]


def attempts_of(
    conn: Connection, ids: Sequence[str], *, livemode: bool
) -> dict[str, list[Attempt]]:
    """Each verification's attempts, oldest first, in one query (for a page of them)."""
    grouped: dict[str, list[Attempt]] = {i: [] for i in ids}
    if not ids:
        return grouped
    for row in conn.execute(_ATTEMPTS_OF_VERIFICATIONS, {"ids": list(ids)}):
        grouped[row.verification_id].append(_joined_attempt(row, livemode))
    return grouped
