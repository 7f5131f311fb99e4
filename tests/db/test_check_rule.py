"""The check rule is a pure function; the SQL that makes it atomic agrees with it everywhere.

Every combination of status, check count, expiry and correctness is run
through `models.count_check` and through the counting UPDATE on the suite's
database, and the two must leave the same verification behind.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from relay.accounts.models import Scope
from relay.db.driver import Db
from relay.db.sql import Sql, Tx
from relay.verifications import store
from relay.verifications.models import CHECK_LIMIT, Status, count_check
from relay.verifications.store import NewVerification
from tests.db.conftest import ACCOUNT_ID

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
SCOPE = Scope(account_id=ACCOUNT_ID, livemode=True)
SET_STATE = Sql("UPDATE verifications SET status = :status, checks = :checks WHERE id = :id")
AFTER = Sql("SELECT status, checks, sealed_code, approved_at FROM verifications WHERE id = :id")

CASES = list(itertools.product(list(Status), range(CHECK_LIMIT + 2), [False, True], [False, True]))


async def _stored(tx: Tx, number: int, status: Status, checks: int, expired: bool) -> str:
    verification_id = f"ver_rule{number:04d}"
    expires_at = NOW - timedelta(minutes=1) if expired else NOW + timedelta(minutes=1)
    new = NewVerification(
        id=verification_id,
        to=f"+1415555{number:04d}",
        country="US",
        sender="Acme",
        locale="en",
        code_length=6,
        code_mac=b"mac",
        sealed_code=b"sealed",
        metadata={},
        webhook_url=None,
        expires_at=expires_at,
    )
    await store.insert_verification(tx, SCOPE, new, NOW - timedelta(minutes=5))
    await tx.execute(SET_STATE, {"id": verification_id, "status": status.value, "checks": checks})
    return verification_id


async def _after(tx: Tx, verification_id: str) -> tuple[Status, int, bool, bool]:
    row = await tx.fetchrow(AFTER, {"id": verification_id})
    assert row is not None
    sealed, approved = row["sealed_code"] is not None, row["approved_at"] is not None
    return Status(row["status"]), row["checks"], sealed, approved


@pytest.mark.asyncio
async def test_the_counting_statement_does_what_the_check_rule_says_for_every_input(
    db: Db,
) -> None:
    async def walk(tx: Tx) -> list[str]:
        disagreements = []
        for number, (status, checks, expired, correct) in enumerate(CASES):
            verification_id = await _stored(tx, number, status, checks, expired)
            expires_at = NOW - timedelta(minutes=1) if expired else NOW + timedelta(minutes=1)
            rule = count_check(
                status=status, checks=checks, expires_at=expires_at, now=NOW, correct=correct
            )
            counted = await store.count_check(tx, SCOPE, verification_id, correct=correct, now=NOW)
            if rule is None:
                expected = (status, checks, True, False)
            else:
                approved = rule.status is Status.APPROVED
                expected = (rule.status, rule.checks, not rule.closes, approved)
            found = await _after(tx, verification_id)
            said = rule
            if counted != said or found != expected:
                case = (status.value, checks, expired, correct)
                disagreements.append(f"{case}: rule {said} {expected}, SQL {counted} {found}")
        return disagreements

    assert await db.write(walk) == []


def test_a_wrong_code_counts_and_the_fifth_closes_the_verification() -> None:
    later = NOW + timedelta(minutes=1)
    results = [
        count_check(status=Status.PENDING, checks=n, expires_at=later, now=NOW, correct=False)
        for n in range(CHECK_LIMIT)
    ]
    assert [r.status if r else None for r in results] == [Status.PENDING] * (CHECK_LIMIT - 1) + [
        Status.MAX_ATTEMPTS_REACHED
    ]
    assert [r.checks if r else None for r in results] == list(range(1, CHECK_LIMIT + 1))


def test_no_check_counts_once_the_verification_has_expired() -> None:
    expired = count_check(status=Status.PENDING, checks=0, expires_at=NOW, now=NOW, correct=True)
    assert expired is None


@pytest.mark.parametrize("status", [s for s in Status if s is not Status.PENDING])
def test_a_closed_verification_stays_closed_whatever_is_checked(status: Status) -> None:
    later = NOW + timedelta(minutes=1)
    assert count_check(status=status, checks=0, expires_at=later, now=NOW, correct=True) is None
