"""SQL for a check's one read: in the caller's scope, or with the key that calls.

The read is the verification with its attempts, its code's MAC, and the wrong
codes its number had within the guard's window (the guard reads the buckets
themselves only when that total reaches its cap). On PostgreSQL a check also
authenticates in it: the key is found by its hash, and the verification is read
only in that key's scope and only if the key is neither revoked nor past its
roll, so the statement that refuses a key has read nothing of another's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.abuse.store import failed_checks_of
from relay.accounts.access import FoundKey
from relay.accounts.key_store import FOUND_KEY_COLUMNS, KEY_AND_ACCOUNT, KEY_UNREVOKED, found_key
from relay.accounts.models import Scope
from relay.db.sql import Row, Sql, Tx
from relay.delivery.joined import JOINED_ATTEMPT_COLUMNS
from relay.phone import Destination
from relay.verifications.models import Verification
from relay.verifications.store import PUBLIC_OF_V, joined

_READ = f"{PUBLIC_OF_V}, v.code_mac, {{failed}} AS failed_checks, {JOINED_ATTEMPT_COLUMNS}"
_FOR_CHECK = (
    f"SELECT {_READ.format(failed=failed_checks_of('v.to_number'))} FROM verifications v"
    " LEFT OUTER JOIN attempts a ON a.verification_id = v.id"
    " WHERE v.account_id = :scope_account AND v.livemode = :scope_livemode AND v.id = {id}"
    " ORDER BY a.id"
)
_BY_NUMBER = (
    "(SELECT id FROM verifications WHERE account_id = {account}"
    " AND livemode = {livemode} AND to_number = :to AND status = 'pending')"
)
_FOR_CHECK_BY_ID = Sql(_FOR_CHECK.format(id=":verification_id"))
_FOR_CHECK_BY_NUMBER = Sql(
    _FOR_CHECK.format(id=_BY_NUMBER.format(account=":scope_account", livemode=":scope_livemode"))
)
# The same read with the key: one row per attempt, each with the key's columns; one
# row whose verification columns are NULL when there is no such verification (or the
# key does not answer); no row when no key has this hash.
_KEYED = (
    f"SELECT {FOUND_KEY_COLUMNS},"
    f" {_READ.format(failed=failed_checks_of('v.to_number', 'v.account_id', 'v.livemode'))}"
    f" FROM {KEY_AND_ACCOUNT} LEFT OUTER JOIN verifications v"
    f" ON v.account_id = k.account_id AND v.livemode = k.livemode AND {KEY_UNREVOKED}"
    " AND v.id = {id}"
    " LEFT OUTER JOIN attempts a ON a.verification_id = v.id"
    " WHERE k.key_hash = :hash ORDER BY a.id"
)
_KEYED_BY_ID = Sql(_KEYED.format(id=":verification_id"))
_KEYED_BY_NUMBER = Sql(
    _KEYED.format(id=_BY_NUMBER.format(account="k.account_id", livemode="k.livemode"))
)


@dataclass(frozen=True)
class CheckMaterial:
    """What a check needs, in one read: the verification, its code's MAC, and the wrong
    codes its number had since the guard's window began."""

    verification: Verification
    code_mac: bytes
    failed_checks: int

    @property
    def destination(self) -> Destination:
        return Destination(e164=self.verification.to, country=self.verification.country)


async def check_material(
    tx: Tx,
    scope: Scope,
    *,
    verification_id: str | None,
    to: str | None,
    failed_since: datetime,
) -> CheckMaterial | None:
    """By id, or the number's pending verification."""
    params = {**scope.params(), "failed_since": failed_since}
    if verification_id is not None:
        rows = await tx.fetch(_FOR_CHECK_BY_ID, {**params, "verification_id": verification_id})
    else:
        rows = await tx.fetch(_FOR_CHECK_BY_NUMBER, {**params, "to": to})
    return _material(rows)


async def keyed_check_material(
    tx: Tx,
    key_hash: str,
    *,
    verification_id: str | None,
    to: str | None,
    failed_since: datetime,
    now: datetime,
) -> tuple[FoundKey | None, CheckMaterial | None]:
    """The key with this hash, and the check's material in that key's scope (by id, or
    the number's pending verification) if the key answers at `now`."""
    params = {"hash": key_hash, "failed_since": failed_since, "now": now}
    if verification_id is not None:
        rows = await tx.fetch(_KEYED_BY_ID, {**params, "verification_id": verification_id})
    else:
        rows = await tx.fetch(_KEYED_BY_NUMBER, {**params, "to": to})
    if not rows:
        return None, None
    return found_key(rows[0]), None if rows[0]["id"] is None else _material(rows)


def _material(rows: list[Row]) -> CheckMaterial | None:
    verification = joined(rows)
    if verification is None:
        return None
    first = rows[0]
    return CheckMaterial(verification, bytes(first["code_mac"]), int(first["failed_checks"]))
