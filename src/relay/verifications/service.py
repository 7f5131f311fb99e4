"""Verification use cases. Each runs in one transaction with the events it causes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from relay.abuse.models import Rules
from relay.abuse.service import AbuseGuard
from relay.accounts.models import Caller, Scope
from relay.clock import Clock
from relay.crypto import Keyring, generate_code
from relay.db.driver import Db
from relay.db.sql import IntegrityViolation, Tx
from relay.delivery.jobs import Submitted
from relay.delivery.owners import Draft, OwnerRef
from relay.delivery.service import Delivery
from relay.errors import (
    RateLimitError,
    RelayError,
    ResendTooSoon,
    ResourceMissing,
)
from relay.events.models import EventType
from relay.ids import new_id
from relay.metrics import observe
from relay.phone import Destination
from relay.sms.text import render_sms
from relay.verifications import events, store
from relay.verifications.models import (
    Status,
    Verification,
    check_is_correct,
    closed_error,
    count_check,
    require_resend_allowed,
)
from relay.verifications.store import CheckMaterial, ListQuery, NewVerification


@dataclass(frozen=True)
class CreateRequest:
    to: str
    locale: str
    code_length: int
    ttl: int
    metadata: dict[str, str]
    webhook_url: str | None


@dataclass(frozen=True)
class Limits:
    max_sends: int = 5
    resend_interval: int = 30


@dataclass(frozen=True)
class _Opened:
    """A verification about to be sent (new or resent), with its code: never log it."""

    id: str
    code: str
    locale: str
    sender: str
    expires_at: datetime


@dataclass(frozen=True)
class _Sent:
    verification_id: str
    # What this process still submits over the network, after the creating transaction,
    # or the verification as that transaction left it.
    submitted: Submitted


def sender_name(brand: str) -> str:
    """Alphanumeric sender ids are at most 11 letters, digits and spaces on most networks."""
    cleaned = re.sub(r"[^A-Za-z0-9 ]", "", brand).strip()[:11].strip()
    return cleaned or "Relay"


class VerificationService:
    def __init__(
        self,
        db: Db,
        keyring: Keyring,
        clock: Clock,
        *,
        delivery: Delivery,
        limits: Limits,
        abuse: AbuseGuard | None = None,
    ) -> None:
        self._abuse = abuse or AbuseGuard(Rules())
        self._db = db
        self._keyring = keyring
        self._clock = clock
        self._delivery = delivery
        self._limits = limits

    async def create(self, caller: Caller, request: CreateRequest) -> Verification:
        destination, route = self._delivery.destination(caller, request.to)
        now = self._clock.now()
        try:
            sent = await self._db.write(
                lambda tx: self._create(tx, caller, request, destination, route, now)
            )
        except IntegrityViolation:
            # Another request opened a verification for this number first: this one is a resend.
            sent = await self._db.write(
                lambda tx: self._create(tx, caller, request, destination, route, now)
            )
        if isinstance(sent, RateLimitError):
            raise sent
        # This process sends: answer once the carrier has taken (or refused) the SMS.
        latest = await self._delivery.finish(sent.submitted)
        if isinstance(latest, Verification):
            return latest
        return await self.retrieve(caller, sent.verification_id)

    async def _create(
        self,
        tx: Tx,
        caller: Caller,
        request: CreateRequest,
        destination: Destination,
        route: tuple[str, ...],
        now: datetime,
    ) -> _Sent | RateLimitError:
        scope = caller.scope
        existing = await self._pending(tx, scope, destination, now)
        refusal = await self._abuse.before_send(
            tx, scope, destination, opens=existing is None, now=now
        )
        if refusal is not None:
            # Returned, not raised: a pumping block written here must commit.
            return refusal
        if existing is None:
            opened = await self._open(tx, caller, request, destination, now)
        else:
            opened = await self._resend(tx, scope, existing, now)
        submitted = await self._send(tx, caller, opened, destination, route, now)
        # Last: the account's and the country's counters are rows that every send
        # updates, and on PostgreSQL a row lock is held until commit.
        await self._abuse.record_send(tx, scope, destination, now=now)
        return _Sent(opened.id, submitted)

    async def _pending(
        self, tx: Tx, scope: Scope, destination: Destination, now: datetime
    ) -> str | None:
        """The number's pending verification, which a create resends, if any."""
        pending = await store.pending_for(tx, scope, destination.e164)
        if pending is None:
            return None
        verification_id, expires_at = pending
        if expires_at > now:
            return verification_id
        # Its TTL ran out before the sweep saw it: close it, and this create opens anew.
        if await store.expire_one(tx, scope, verification_id, now=now):
            await self._emit_for(tx, scope, verification_id, EventType.VERIFICATION_EXPIRED, now)
        return None

    async def _send(
        self,
        tx: Tx,
        caller: Caller,
        opened: _Opened,
        destination: Destination,
        route: tuple[str, ...],
        now: datetime,
    ) -> Submitted:
        body = render_sms(
            locale=opened.locale,
            brand=caller.brand,
            code=opened.code,
            webotp_domain=caller.webotp_domain,
        )
        draft = Draft(
            to=destination.e164, sender=opened.sender, body=body, expires_at=opened.expires_at
        )
        owner = OwnerRef("verification", opened.id)
        submitted = await self._delivery.send(tx, owner, draft, route, now=now)
        if submitted.job is None and not isinstance(submitted.latest, Verification):
            return Submitted(latest=await self._load(tx, caller.scope, opened.id))
        return submitted

    async def _open(
        self,
        tx: Tx,
        caller: Caller,
        request: CreateRequest,
        destination: Destination,
        now: datetime,
    ) -> _Opened:
        verification_id = new_id("ver")
        code = generate_code(request.code_length)
        new = NewVerification(
            id=verification_id,
            to=destination.e164,
            country=destination.country,
            sender=sender_name(caller.brand),
            locale=request.locale,
            code_length=request.code_length,
            code_mac=self._keyring.code_mac(verification_id, code),
            sealed_code=self._keyring.seal(verification_id, code),
            metadata=request.metadata,
            webhook_url=request.webhook_url,
            expires_at=now + timedelta(seconds=request.ttl),
        )
        await store.insert_verification(tx, caller.scope, new, now)
        observe.verification_created(tx, livemode=caller.livemode)
        return _Opened(verification_id, code, new.locale, new.sender, new.expires_at)

    async def _resend(self, tx: Tx, scope: Scope, verification_id: str, now: datetime) -> _Opened:
        current = await self._load(tx, scope, verification_id)
        require_resend_allowed(
            current,
            now=now,
            max_sends=self._limits.max_sends,
            interval=self._limits.resend_interval,
        )
        if not await store.count_resend(
            tx, scope, verification_id, seen_sends=current.sends, now=now
        ):
            raise ResendTooSoon(retry_after=self._limits.resend_interval)
        secrets = await store.load_secrets(tx, scope, verification_id)
        if secrets is None or secrets[1] is None:
            raise ResourceMissing()
        code = self._keyring.unseal(verification_id, secrets[1])
        return _Opened(verification_id, code, current.locale, current.sender, current.expires_at)

    async def retrieve(self, caller: Caller, verification_id: str) -> Verification:
        found = await self._db.read(lambda tx: store.load(tx, caller.scope, verification_id))
        if found is None:
            raise ResourceMissing(f"No such verification: {verification_id}", param="id")
        return found

    async def check(
        self,
        caller: Caller,
        *,
        code: str,
        verification_id: str | None = None,
        to: str | None = None,
    ) -> Verification:
        now = self._clock.now()
        verification, error = await self._db.write(
            lambda tx: self._check(
                tx, caller, code=code, verification_id=verification_id, to=to, now=now
            )
        )
        if error is not None:
            raise error
        return verification

    async def _check(
        self,
        tx: Tx,
        caller: Caller,
        *,
        code: str,
        verification_id: str | None,
        to: str | None,
        now: datetime,
    ) -> tuple[Verification, RelayError | None]:
        scope = caller.scope
        target = verification_id or (to and await store.pending_id_for(tx, scope, to))
        found = await store.check_material(tx, scope, target) if target else None
        if target is None or found is None:
            param = "id" if verification_id else "to"
            raise ResourceMissing("No pending verification matches.", param=param)
        destination = found.destination
        matches = self._keyring.code_matches(target, code, found.code_mac)
        correct = check_is_correct(submitted=code, livemode=caller.livemode, matches=matches)
        refusal = await self._abuse.before_check(tx, scope, destination.e164, now=now)
        if refusal:
            return await self._load(tx, scope, target), refusal
        verification, error = await self._count(tx, scope, target, found, correct, now)
        if error is not None:
            return verification, error
        # Last, for the same reason as in create: shared counter rows, locked until commit.
        await self._abuse.record_check(tx, scope, destination, correct=correct, now=now)
        return verification, None

    async def _count(
        self,
        tx: Tx,
        scope: Scope,
        target: str,
        found: CheckMaterial,
        correct: bool,
        now: datetime,
    ) -> tuple[Verification, RelayError | None]:
        """Count the check by the check rule; the verification after it, or why it is closed."""
        rule = count_check(
            status=found.status,
            checks=found.checks,
            expires_at=found.expires_at,
            now=now,
            correct=correct,
        )
        # The read may be stale under concurrent checks, but only ever towards "not
        # counted" (checks grow, closed stays closed, time passes): a refusal holds.
        # A count is made by the UPDATE, which applies the same rule to the row as
        # it is, atomically, and whose answer wins.
        if rule is None:
            return await self._closed(tx, scope, target, now)
        status = await store.count_check(tx, scope, target, correct=correct, now=now)
        if status is None:
            return await self._closed(tx, scope, target, now)
        verification = await self._load(tx, scope, target)
        if status is Status.APPROVED:
            observe.verification_approved(tx, livemode=verification.livemode)
            await events.record(tx, verification, EventType.VERIFICATION_APPROVED, now)
        elif status is Status.MAX_ATTEMPTS_REACHED:
            await events.record(tx, verification, EventType.VERIFICATION_MAX_ATTEMPTS_REACHED, now)
        return verification, None

    async def _closed(
        self, tx: Tx, scope: Scope, target: str, now: datetime
    ) -> tuple[Verification, RelayError]:
        """Not open: report why, after closing it if its TTL ran out unnoticed."""
        if await store.expire_one(tx, scope, target, now=now):
            await self._emit_for(tx, scope, target, EventType.VERIFICATION_EXPIRED, now)
        verification = await self._load(tx, scope, target)
        return verification, closed_error(verification.status_at(now))

    async def cancel(self, caller: Caller, verification_id: str) -> Verification:
        now = self._clock.now()
        verification, error = await self._db.write(
            lambda tx: self._cancel(tx, caller.scope, verification_id, now)
        )
        if error is not None:
            raise error
        return verification

    async def _cancel(
        self, tx: Tx, scope: Scope, verification_id: str, now: datetime
    ) -> tuple[Verification, RelayError | None]:
        if await store.cancel(tx, scope, verification_id, now=now):
            return await self._load(tx, scope, verification_id), None
        if await store.expire_one(tx, scope, verification_id, now=now):
            await self._emit_for(tx, scope, verification_id, EventType.VERIFICATION_EXPIRED, now)
        verification = await store.load(tx, scope, verification_id)
        if verification is None:
            raise ResourceMissing(f"No such verification: {verification_id}", param="id")
        status = verification.status_at(now)
        return verification, None if status is Status.CANCELED else closed_error(status)

    async def list(self, caller: Caller, query: ListQuery) -> tuple[list[Verification], bool]:
        now = self._clock.now()
        # A page and its attempts, as of one commit.
        return await self._db.snapshot(lambda tx: store.list_page(tx, caller.scope, query, now=now))

    async def expire_due(self, *, batch: int = 200) -> int:
        """The sweep: close verifications whose TTL elapsed, one event each."""
        now = self._clock.now()

        async def work(tx: Tx) -> int:
            closed = await store.expire_due(tx, now=now, limit=batch)
            for verification_id in closed:
                row = await store.load_any(tx, verification_id)
                if row is not None:
                    await events.record(tx, row, EventType.VERIFICATION_EXPIRED, now)
            return len(closed)

        # Looked at read-only first: an idle sweep must not take SQLite's write lock.
        if not await self._db.read(lambda tx: store.any_due(tx, now=now)):
            return 0
        return await self._db.write(work)

    async def _load(self, tx: Tx, scope: Scope, verification_id: str) -> Verification:
        found = await store.load(tx, scope, verification_id)
        if found is None:
            raise ResourceMissing(param="id")
        return found

    async def _emit_for(
        self, tx: Tx, scope: Scope, verification_id: str, kind: EventType, now: datetime
    ) -> None:
        await events.record(tx, await self._load(tx, scope, verification_id), kind, now)
