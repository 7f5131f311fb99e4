"""SQL for a check's one read, in the caller's scope.

The read is the verification with its attempts, its code's MAC, and the wrong
codes its number had within the guard's window (the guard reads the buckets
themselves only when that total reaches its cap).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.abuse.store import failed_checks_of
from relay.accounts.models import Scope
from relay.db.sql import Row, Sql, Tx
from relay.delivery.joined import JOINED_ATTEMPT_COLUMNS
from relay.records import fast_init
from relay.verifications.models import Verification
from relay.verifications.store import IN_SCOPE_OF_V, SCOPE_BY_KEY, SCOPE_OF_V, joined

_READ = f"{IN_SCOPE_OF_V}, v.code_mac, {{failed}} AS failed_checks, {JOINED_ATTEMPT_COLUMNS}"
_FOR_CHECK = (
    f"SELECT {_READ.format(failed=failed_checks_of('v.to_number'))} FROM verifications v"
    " LEFT OUTER JOIN attempts a ON a.verification_id = v.id"
    " WHERE {scope} AND v.id = {id} ORDER BY a.id"
)
_BY_NUMBER = (
    "(SELECT id FROM verifications WHERE account_id = :scope_account"
    " AND livemode = :scope_livemode AND to_number = :to AND status = 'pending')"
)


def _for_check(id_: str) -> Sql:
    return Sql(
        _FOR_CHECK.format(scope=SCOPE_BY_KEY, id=id_),
        postgres=_FOR_CHECK.format(scope=SCOPE_OF_V, id=id_),
        wide=True,
    )


_FOR_CHECK_BY_ID = _for_check(":verification_id")
_FOR_CHECK_BY_NUMBER = _for_check(_BY_NUMBER)


@fast_init
@dataclass(frozen=True)
class CheckMaterial:
    """What a check needs, in one read: the verification, its code's MAC, and the wrong
    codes its destination had since the guard's window began."""

    verification: Verification
    code_mac: bytes
    failed_checks: int
    # Its `to_number`: the destination its wrong codes count against (an email's mailbox).
    key: str


async def check_material(
    tx: Tx,
    scope: Scope,
    *,
    verification_id: str | None,
    to: str | None,
    failed_since: datetime,
) -> CheckMaterial | None:
    """By id, or the pending verification of `to` (a number, or an email's mailbox)."""
    params = {**scope.params(), "failed_since": failed_since}
    if verification_id is not None:
        rows = await tx.fetch(_FOR_CHECK_BY_ID, {**params, "verification_id": verification_id})
    else:
        rows = await tx.fetch(_FOR_CHECK_BY_NUMBER, {**params, "to": to})
    return _material(rows, scope)


def _material(rows: list[Row], scope: Scope) -> CheckMaterial | None:
    verification = joined(rows, scope)
    if verification is None:
        return None
    first = rows[0]
    return CheckMaterial(
        verification, bytes(first["code_mac"]), int(first["failed_checks"]), first["to_number"]
    )
