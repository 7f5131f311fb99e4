"""Verification use cases. Each runs in one transaction with the events it causes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from relay.abuse.models import Rules
from relay.abuse.service import AbuseGuard
from relay.abuse.store import SendContext
from relay.accounts.models import Caller, Scope
from relay.carriers.base import Channel
from relay.clock import Clock
from relay.crypto import Keyring, generate_code
from relay.db.driver import Db
from relay.db.sql import IntegrityViolation, Tx
from relay.delivery.jobs import Submitted
from relay.delivery.owners import Draft, OwnerRef
from relay.delivery.routes import Route, route_for
from relay.delivery.service import Delivery
from relay.errors import (
    RateLimitError,
    RelayError,
    ResendTooSoon,
    ResourceMissing,
)
from relay.events.models import EventType
from relay.idempotency import claims
from relay.idempotency.claims import Pending
from relay.ids import new_id
from relay.metrics import observe
from relay.phone import Destination
from relay.records import changed, fast_init
from relay.sms.custom import NO_TEMPLATES, CustomTemplates
from relay.sms.locales import resolve_locale
from relay.sms.templates import BUILT_IN_LOCALES
from relay.verifications import events, pages, store
from relay.verifications.checking import Checks
from relay.verifications.destinations import destination_for
from relay.verifications.models import (
    RERUNS,
    Moved,
    Status,
    Verification,
    closed_error,
    require_resend_allowed,
    resource_path,
    sender_name,
)
from relay.verifications.pages import ListQuery
from relay.verifications.store import NewVerification

# The locales of Relay's own texts, as a set once: most accounts have none of their own.
_BUILT_IN = frozenset(BUILT_IN_LOCALES)


@fast_init
@dataclass(frozen=True)
class CreateRequest:
    to: str
    # A well-formed BCP 47 tag, or None: the destination's country decides.
    locale: str | None
    code_length: int
    ttl: int
    metadata: dict[str, str]
    webhook_url: str | None
    # In the order to try them; checked by `destinations.require_channels`.
    channels: tuple[Channel, ...] = ("sms",)
    # How the request named them, for the errors about them: `channel` or `channels`.
    channels_param: str = "channel"


@dataclass(frozen=True)
class Limits:
    max_sends: int = 5
    resend_interval: int = 30


@fast_init
@dataclass(frozen=True)
class _Opened:
    """A verification about to be sent (new or resent), with its code: never log it."""

    code: str
    # As this unit leaves it, before its send's attempts.
    verification: Verification
    # What a new one inserts; None for a resend, counted over `seen_sends`.
    new: NewVerification | None = None
    seen_sends: int = 0

    @property
    def id(self) -> str:
        return self.verification.id


@fast_init
@dataclass(frozen=True)
class _Sent:
    verification_id: str
    # What this process still submits over the network, after the creating transaction,
    # or the verification as that transaction left it.
    submitted: Submitted


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
        self._checks = Checks(db, keyring, clock, self._abuse)

    async def create(self, caller: Caller, request: CreateRequest) -> Verification:
        destination = destination_for(request.to, request.channels, livemode=caller.livemode)
        delivery = self._delivery
        route = await route_for(
            delivery.carriers,
            delivery.measured,
            caller,
            destination,
            request.channels,
            param=request.channels_param,
        )
        now = self._clock.now()
        claim = claims.pending()
        try:
            sent = await self._db.write(
                lambda tx: self._create(tx, caller, request, destination, route, now, claim)
            )
        except IntegrityViolation:
            # Another request opened a verification for this destination first (an
            # email's mailbox, in any spelling): a resend.
            sent = await self._db.write(
                lambda tx: self._create(tx, caller, request, destination, route, now, claim)
            )
        if isinstance(sent, RateLimitError):
            raise sent
        # This process sends: answer once the carrier has taken (or refused) the SMS, and
        # keep that answer in the unit that records the carrier's.
        then = None if claim is None else claim.keep
        latest = await self._delivery.finish(sent.submitted, then=then)
        if isinstance(latest, Verification):
            return latest
        return await self.retrieve(caller, sent.verification_id)

    async def _create(
        self,
        tx: Tx,
        caller: Caller,
        request: CreateRequest,
        destination: Destination,
        route: Route,
        now: datetime,
        claim: Pending | None,
    ) -> _Sent | RateLimitError:
        """The whole create, in one unit: its one read, every decision, then its writes."""
        scope = caller.scope
        # The one read: the guard's counters and blocks, the destination's pending and
        # recent verifications, the account's own texts when it has some.
        seen = await self._abuse.look(
            tx,
            scope,
            destination,
            now=now,
            channel=request.channels[0],
            texts=caller.has_templates,
        )
        existing = await self._pending(tx, scope, seen, now)
        refusal = await self._abuse.refusal(
            tx, scope, destination, seen, opens=existing is None, now=now
        )
        if refusal is not None:
            if claim is not None:
                await claim.require_free(tx, now)
            # Returned, not raised: a pumping block written here must commit. The key is
            # not taken: a 429 is not kept.
            return refusal
        custom = CustomTemplates.of(seen.texts) if seen.texts else NO_TEMPLATES
        if existing is None:
            opened = self._open(caller, request, destination, now, custom)
        else:
            opened = await self._resend(tx, scope, existing, now, request.channels)
        sending = self._delivery.decide(
            tx,
            OwnerRef("verification", opened.id),
            self._draft(caller, opened, now, custom),
            route.carriers,
            opened=opened.verification,
            livemode=caller.livemode,
            now=now,
            channels=route.channels,
        )
        if claim is not None:
            # First of the writes, with the answer: a request racing it under the key
            # stops here, having written nothing.
            path = resource_path(opened.id)
            await claim.take(tx, resource_path=path, result=sending.answer, now=now)
        if opened.new is not None:
            await store.insert_verification(tx, scope, opened.new, now)
            observe.verification_created(tx, livemode=caller.livemode, channel=request.channels[0])
        elif not await store.count_resend(
            tx, scope, opened.id, seen_sends=opened.seen_sends, now=now, channels=request.channels
        ):
            raise ResendTooSoon(retry_after=self._limits.resend_interval)
        submitted = await self._delivery.write(tx, sending, now=now)
        # Last: the account's and the country's counters are rows that every send
        # updates, and on PostgreSQL a row lock is held until commit.
        await self._abuse.record_send(tx, scope, destination, now=now)
        return _Sent(opened.id, submitted)

    async def _pending(self, tx: Tx, scope: Scope, seen: SendContext, now: datetime) -> str | None:
        """The number's pending verification, which a create resends, if any."""
        pending = next((v for v in seen.verifications if v.pending), None)
        if pending is None:
            return None
        if pending.expires_at > now:
            return pending.id
        # Its TTL ran out before the sweep saw it: close it, and this create opens anew.
        if await store.expire_one(tx, scope, pending.id, now=now):
            await events.record_now(tx, scope, pending.id, EventType.VERIFICATION_EXPIRED, now)
        return None

    def _draft(
        self, caller: Caller, opened: _Opened, now: datetime, custom: CustomTemplates
    ) -> Draft:
        verification = opened.verification
        return Draft.render(
            # The address it was opened for: a resend asked for by another spelling of
            # the mailbox sends the code where it went before, never to a new address.
            to=verification.to,
            sender=verification.sender,
            locale=verification.locale,
            brand=caller.brand,
            code=opened.code,
            webotp_domain=caller.webotp_domain,
            expires_at=verification.expires_at,
            now=now,
            custom=custom,
        )

    def _open(
        self,
        caller: Caller,
        request: CreateRequest,
        destination: Destination,
        now: datetime,
        custom: CustomTemplates,
    ) -> _Opened:
        verification_id = new_id("ver")
        code = generate_code(request.code_length)
        locale = resolve_locale(
            request.locale,
            country=destination.country,
            available=custom.locales | _BUILT_IN if custom.texts else _BUILT_IN,
        )
        new = NewVerification(
            id=verification_id,
            to=destination.e164,
            mailbox=destination.mailbox,
            country=destination.country,
            sender=sender_name(caller.brand),
            locale=locale,
            code_length=request.code_length,
            code_mac=self._keyring.code_mac(verification_id, code),
            sealed_code=self._keyring.seal(verification_id, code),
            metadata=request.metadata,
            webhook_url=request.webhook_url,
            expires_at=now + timedelta(seconds=request.ttl),
            channels=request.channels,
        )
        return _Opened(code, store.as_written(caller.scope, new, now), new)

    async def _resend(
        self,
        tx: Tx,
        scope: Scope,
        verification_id: str,
        now: datetime,
        channels: tuple[Channel, ...],
    ) -> _Opened:
        """The same code again, on the channels this request asks for (they may differ
        from the last send's: a code that did not arrive by SMS may go by WhatsApp)."""
        found = await store.load_sealed(tx, scope, verification_id)
        if found is None:
            raise ResourceMissing(param="id")
        current, sealed = found
        require_resend_allowed(
            current,
            now=now,
            max_sends=self._limits.max_sends,
            interval=self._limits.resend_interval,
            channel=channels[0],
        )
        if sealed is None:
            raise ResourceMissing()
        code = self._keyring.unseal(verification_id, sealed)
        resent = changed(
            current, sends=current.sends + 1, last_sent_at=now, updated_at=now, channels=channels
        )
        return _Opened(code, resent, seen_sends=current.sends)

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
        return await self._checks.check(caller, code=code, verification_id=verification_id, to=to)

    async def cancel(self, caller: Caller, verification_id: str) -> Verification:
        now = self._clock.now()
        claim = claims.pending()
        for _ in range(RERUNS):
            try:
                verification, error = await self._db.write(
                    lambda tx: self._cancel(tx, caller.scope, verification_id, now, claim)
                )
            except Moved:
                continue
            if error is not None:
                raise error
            return verification
        raise Moved()

    async def _cancel(
        self, tx: Tx, scope: Scope, verification_id: str, now: datetime, claim: Pending | None
    ) -> tuple[Verification, RelayError | None]:
        current = await store.load(tx, scope, verification_id)
        if current is None:
            raise ResourceMissing(f"No such verification: {verification_id}", param="id")
        status = current.status_at(now)
        if status is Status.PENDING:
            canceled = changed(current, status=Status.CANCELED, canceled_at=now, updated_at=now)
            if claim is not None:
                path = resource_path(verification_id)
                await claim.take(tx, resource_path=path, result=canceled, now=now)
            if not await store.cancel(tx, scope, verification_id, now=now):
                raise Moved()
            return canceled, None
        if current.status is Status.PENDING:
            # Its TTL ran out before the sweep saw it: close it, with its event.
            if not await store.expire_one(tx, scope, verification_id, now=now):
                raise Moved()
            if claim is not None:
                # Its answer is not kept with the key; a request the key refuses changes
                # nothing, not even this.
                await claim.require_free(tx, now)
            expired = changed(current, status=Status.EXPIRED, updated_at=now)
            await events.record(tx, expired, EventType.VERIFICATION_EXPIRED, now)
            return expired, closed_error(Status.EXPIRED)
        return current, None if status is Status.CANCELED else closed_error(status)

    async def list(self, caller: Caller, query: ListQuery) -> tuple[list[Verification], bool]:
        now = self._clock.now()
        # A page and its attempts, as of one commit.
        return await self._db.snapshot(lambda tx: pages.list_page(tx, caller.scope, query, now=now))

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
