"""Attempts as the API shows them, read with (or for) the verification or message they serve."""

from __future__ import annotations

from collections.abc import Sequence

from relay.db.sql import Row, Sql, Tx, document, moment
from relay.delivery.attempts import Attempt, AttemptStatus

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_STATUS_OF: dict[str, AttemptStatus] = {member.value: member for member in AttemptStatus}

# For loads that join an owner to its attempts (table alias `a`) in one
# statement (one owner, one round trip): the attempt's columns under names of their own.
JOINED_ATTEMPT_COLUMNS = (
    "a.id AS attempt_id, a.status AS attempt_status, a.carrier AS attempt_carrier,"
    " a.at AS attempt_at, a.error AS attempt_error, a.channel AS attempt_channel"
)
_ATTEMPTS_OF_VERIFICATIONS = Sql(
    "SELECT a.verification_id, a.id AS attempt_id, a.status AS attempt_status,"
    " a.carrier AS attempt_carrier, a.at AS attempt_at, a.error AS attempt_error,"
    " a.channel AS attempt_channel FROM attempts a"
    " WHERE a.verification_id IN (SELECT value FROM json_each(:ids))"
    " ORDER BY a.verification_id, a.id",
    postgres="SELECT a.verification_id, a.id AS attempt_id, a.status AS attempt_status,"
    " a.carrier AS attempt_carrier, a.at AS attempt_at, a.error AS attempt_error,"
    " a.channel AS attempt_channel FROM attempts a"
    " WHERE a.verification_id IN (SELECT json_array_elements_text(CAST(:ids AS json)))"
    " ORDER BY a.verification_id, a.id",
)


def _joined_attempt(row: Row, livemode: bool) -> Attempt:
    return Attempt(
        id=row["attempt_id"],
        status=_STATUS_OF[row["attempt_status"]],
        carrier=row["attempt_carrier"],
        at=moment(row["attempt_at"]),
        error=document(row["attempt_error"]),
        livemode=livemode,
        channel=row["attempt_channel"] or "sms",
    )


def joined_attempts(rows: Sequence[Row], *, livemode: bool) -> list[Attempt]:
    """The attempts in rows selected with JOINED_ATTEMPT_COLUMNS (an outer join: none is NULL)."""
    return [_joined_attempt(row, livemode) for row in rows if row["attempt_id"] is not None]


async def attempts_of(tx: Tx, ids: Sequence[str], *, livemode: bool) -> dict[str, list[Attempt]]:
    """Each verification's attempts, oldest first, in one query (for a page of them)."""
    grouped: dict[str, list[Attempt]] = {i: [] for i in ids}
    if not ids:
        return grouped
    for row in await tx.fetch(_ATTEMPTS_OF_VERIFICATIONS, {"ids": list(ids)}):
        grouped[row["verification_id"]].append(_joined_attempt(row, livemode))
    return grouped
