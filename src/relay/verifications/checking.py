"""Checking a code: the check rule applied in one unit of work with its event and counters."""

from __future__ import annotations

from datetime import datetime

from relay.abuse.service import AbuseGuard
from relay.accounts.models import Caller, Scope
from relay.clock import Clock
from relay.crypto import Keyring
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.errors import RelayError, ResourceMissing
from relay.events.models import EventType
from relay.idempotency import claims
from relay.idempotency.claims import Pending
from relay.metrics import observe
from relay.records import changed
from relay.verifications import check_store, events, store
from relay.verifications.check_store import CheckMaterial
from relay.verifications.models import (
    RERUNS,
    Moved,
    Status,
    Verification,
    check_is_correct,
    closed_error,
    count_check,
    resource_path,
)


class Checks:
    def __init__(self, db: Db, keyring: Keyring, clock: Clock, abuse: AbuseGuard) -> None:
        self._db = db
        self._keyring = keyring
        self._clock = clock
        self._abuse = abuse

    async def check(
        self,
        caller: Caller,
        *,
        code: str,
        verification_id: str | None = None,
        to: str | None = None,
    ) -> Verification:
        now = self._clock.now()
        claim = claims.pending()
        for _ in range(RERUNS):
            checked = await self._once(caller, code, verification_id, to, now, claim)
            if checked is not None:
                return checked
        raise Moved()

    async def _once(
        self,
        caller: Caller,
        code: str,
        verification_id: str | None,
        to: str | None,
        now: datetime,
        claim: Pending | None,
    ) -> Verification | None:
        """The check, or None if the verification moved between its read and its write."""
        # Read before the write, not in it: the read locks nothing, and every change the
        # check makes is a statement that restates its rule on the row as it is then (see
        # `_count`), so a read that a concurrent check overtook makes the write find the
        # row moved, never count more. A wrong code may then commit alone.
        found = await self._db.read(lambda tx: self._material(tx, caller, verification_id, to, now))
        if claim is None and not self._correct(caller, code, found):
            counted = await self._wrong_code(caller.scope, found, now)
            if counted is not None:
                return counted
        try:
            verification, error = await self._db.write(
                lambda tx: self._check(tx, caller, code, now, claim, found)
            )
        except Moved:
            return None
        if error is not None:
            raise error
        return verification

    async def _material(
        self,
        tx: Tx,
        caller: Caller,
        verification_id: str | None,
        to: str | None,
        now: datetime,
    ) -> CheckMaterial:
        found = await check_store.check_material(
            tx,
            caller.scope,
            verification_id=verification_id,
            to=None if verification_id else to,
            failed_since=self._abuse.failed_checks_since(now),
        )
        return _required(found, verification_id)

    def _correct(self, caller: Caller, code: str, found: CheckMaterial) -> bool:
        matches = self._keyring.code_matches(found.verification.id, code, found.code_mac)
        return check_is_correct(submitted=code, livemode=caller.livemode, matches=matches)

    async def _wrong_code(
        self, scope: Scope, found: CheckMaterial, now: datetime
    ) -> Verification | None:
        """A wrong code that, as read, neither closes the verification nor meets the guard's
        cap: no event, no refusal, so one statement on PostgreSQL. None: it was not
        counted so (the row moved since it was read), and the whole check decides."""
        current = found.verification
        rule = count_check(
            status=current.status,
            checks=current.checks,
            expires_at=current.expires_at,
            now=now,
            correct=False,
        )
        if rule is None or rule.status is not Status.PENDING:
            return None
        if not self._abuse.allows_check(scope, found.failed_checks):
            return None
        checks = await self._db.write_alone(
            lambda tx: store.count_wrong_check(tx, scope, current, destination=found.key, now=now)
        )
        if checks is None:
            return None
        return changed(current, checks=checks, updated_at=now)

    async def _check(
        self,
        tx: Tx,
        caller: Caller,
        code: str,
        now: datetime,
        claim: Pending | None,
        found: CheckMaterial,
    ) -> tuple[Verification, RelayError | None]:
        """The whole check, in one unit, on its material as read (`found`): decided, then
        written, the key first with the answer when one came."""
        scope = caller.scope
        current = found.verification
        correct = self._correct(caller, code, found)
        refusal = await self._abuse.before_check(
            tx, scope, found.key, failed_checks=found.failed_checks, now=now
        )
        if refusal:
            # The key is not taken: a 429 is not kept.
            return current, refusal
        rule = count_check(
            status=current.status,
            checks=current.checks,
            expires_at=current.expires_at,
            now=now,
            correct=correct,
        )
        if rule is None:
            return await self._closed(tx, scope, current, now, claim)
        approved = rule.status is Status.APPROVED
        verification = changed(
            current,
            status=rule.status,
            checks=rule.checks,
            updated_at=now,
            approved_at=now if approved else current.approved_at,
        )
        if claim is not None:
            # First of the writes, with the answer: a request racing it under the key
            # stops here, having written nothing.
            path = resource_path(current.id)
            await claim.take(tx, resource_path=path, result=verification, now=now)
        await self._count(tx, scope, found, verification, correct, now)
        return verification, None

    async def _count(
        self,
        tx: Tx,
        scope: Scope,
        found: CheckMaterial,
        verification: Verification,
        correct: bool,
        now: datetime,
    ) -> None:
        """Count the check as decided (`verification`), with its event and counters.

        The read may be stale under concurrent checks. The UPDATE applies the check rule
        to the row as it is, atomically; if that is not what was decided (another check
        or a cancel came first), the unit rolls back (`Moved`) and the check runs again.
        """
        current = found.verification
        if not correct and verification.status is Status.PENDING:
            # A wrong code that leaves it pending: no event; on PostgreSQL the counting
            # UPDATE writes the destination's wrong code too, in one statement.
            checks = await store.count_wrong_check(
                tx, scope, current, destination=found.key, now=now
            )
            if checks != verification.checks:
                raise Moved()
            return
        counted = await store.count_check(tx, scope, current.id, correct=correct, now=now)
        if counted is None or counted.status is not verification.status:
            raise Moved()
        if counted.checks != verification.checks:
            raise Moved()
        if correct:
            observe.verification_approved(tx, livemode=verification.livemode)
            await events.record(tx, verification, EventType.VERIFICATION_APPROVED, now)
        else:
            await events.record(tx, verification, EventType.VERIFICATION_MAX_ATTEMPTS_REACHED, now)
        # Last, for the same reason as in create: shared counter rows, locked until commit.
        await self._abuse.record_check(
            tx,
            scope,
            number=found.key,
            e164=current.to,
            country=current.country,
            correct=correct,
            now=now,
        )

    async def _closed(
        self, tx: Tx, scope: Scope, current: Verification, now: datetime, claim: Pending | None
    ) -> tuple[Verification, RelayError]:
        """Not open as read: report why, after closing it if its TTL ran out unnoticed."""
        if await store.expire_one(tx, scope, current.id, now=now):
            if claim is not None:
                # Its answer is not kept with the key; a request the key refuses changes
                # nothing, not even this.
                await claim.require_free(tx, now)
            kind = EventType.VERIFICATION_EXPIRED
            current = await events.record_now(tx, scope, current.id, kind, now)
        return current, closed_error(current.status_at(now))


def _required(found: CheckMaterial | None, verification_id: str | None) -> CheckMaterial:
    if found is None:
        param = "id" if verification_id else "to"
        raise ResourceMissing("No pending verification matches.", param=param)
    return found
