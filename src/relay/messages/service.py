"""Send API use cases: deliver a code the client generated, through the same routes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from relay.abuse.service import AbuseGuard
from relay.accounts.models import Caller
from relay.clock import Clock
from relay.crypto import Keyring
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.delivery.jobs import Submitted
from relay.delivery.owners import Draft, OwnerRef
from relay.delivery.routes import route_to
from relay.delivery.service import Delivery
from relay.errors import RateLimitError, ResourceMissing
from relay.idempotency import claims
from relay.idempotency.claims import Pending
from relay.ids import new_id
from relay.messages import store
from relay.messages.models import Message
from relay.messages.store import NewMessage
from relay.phone import Destination
from relay.records import fast_init
from relay.sms.custom import NO_TEMPLATES, CustomTemplates
from relay.sms.locales import resolve_locale
from relay.sms.templates import BUILT_IN_LOCALES

# The locales of Relay's own texts, as a set once: most accounts have none of their own.
_BUILT_IN = frozenset(BUILT_IN_LOCALES)


@fast_init
@dataclass(frozen=True)
class SendRequest:
    """`code` is the client's secret: never log it."""

    to: str
    code: str
    # A well-formed BCP 47 tag, or None: the destination's country decides.
    locale: str | None
    metadata: dict[str, str]
    webhook_url: str | None


@fast_init
@dataclass(frozen=True)
class _Queued:
    message_id: str
    # What this process still submits over the network, after the creating transaction,
    # or the message as that transaction left it.
    submitted: Submitted


class MessageService:
    def __init__(
        self,
        db: Db,
        keyring: Keyring,
        clock: Clock,
        *,
        delivery: Delivery,
        abuse: AbuseGuard,
        sender: str,
        ttl: int,
    ) -> None:
        self._db = db
        self._keyring = keyring
        self._clock = clock
        self._delivery = delivery
        self._abuse = abuse
        self._sender = sender
        self._ttl = timedelta(seconds=ttl)

    async def send(self, caller: Caller, request: SendRequest) -> Message:
        delivery = self._delivery
        destination, route = await route_to(
            delivery.carriers, delivery.measured, caller, request.to
        )
        now = self._clock.now()
        claim = claims.pending()
        queued = await self._db.write(
            lambda tx: self._queue(tx, caller, request, destination, route, now, claim)
        )
        if isinstance(queued, RateLimitError):
            raise queued
        then = None if claim is None else claim.keep
        latest = await self._delivery.finish(queued.submitted, then=then)
        if isinstance(latest, Message):
            return latest
        return await self.retrieve(caller, queued.message_id)

    async def _queue(
        self,
        tx: Tx,
        caller: Caller,
        request: SendRequest,
        destination: Destination,
        route: tuple[str, ...],
        now: datetime,
        claim: Pending | None,
    ) -> _Queued | RateLimitError:
        """The whole send, in one unit: its one read, every decision, then its writes."""
        scope = caller.scope
        # The same pumping and volume guards as verifications: an SMS costs the same. One
        # read, with the account's own texts when it has some.
        seen = await self._abuse.look(tx, scope, destination, now=now, texts=caller.has_templates)
        refusal = await self._abuse.refusal(tx, scope, destination, seen, opens=True, now=now)
        if refusal is not None:
            if claim is not None:
                await claim.require_free(tx, now)
            # Returned, not raised: a pumping block written here must commit. The key is
            # not taken: a 429 is not kept.
            return refusal
        custom = CustomTemplates.of(seen.texts) if seen.texts else NO_TEMPLATES
        message_id = new_id("msg")
        locale = resolve_locale(
            request.locale,
            country=destination.country,
            available=custom.locales | _BUILT_IN if custom.texts else _BUILT_IN,
        )
        new = NewMessage(
            id=message_id,
            to=destination.e164,
            country=destination.country,
            sender=self._sender,
            locale=locale,
            sealed_code=self._keyring.seal(message_id, request.code),
            metadata=request.metadata,
            webhook_url=request.webhook_url,
            expires_at=now + self._ttl,
        )
        draft = Draft.render(
            to=new.to,
            sender=new.sender,
            locale=new.locale,
            brand=caller.brand,
            code=request.code,
            webotp_domain=caller.webotp_domain,
            expires_at=new.expires_at,
            now=now,
            custom=custom,
        )
        sending = self._delivery.decide(
            tx,
            OwnerRef("message", message_id),
            draft,
            route,
            opened=store.as_written(scope, new, now),
            livemode=caller.livemode,
            now=now,
        )
        if claim is not None:
            # First of the writes, with the answer: a request racing it under the key
            # stops here, having written nothing.
            path = f"/v1/messages/{message_id}"
            await claim.take(tx, resource_path=path, result=sending.answer, now=now)
        # Written in the state its send's answers left it: no UPDATE after the INSERT.
        sent = sending.told.state.snapshot
        assert isinstance(sent, Message)
        await store.insert_message(tx, scope, new, now, status=sent.status)
        submitted = await self._delivery.write(tx, sending, now=now)
        # Last: shared counter rows, locked until commit on PostgreSQL (see verifications).
        await self._abuse.record_send(tx, scope, destination, now=now)
        return _Queued(message_id, submitted)

    async def retrieve(self, caller: Caller, message_id: str) -> Message:
        found = await self._db.read(lambda tx: store.load(tx, caller.scope, message_id))
        if found is None:
            raise ResourceMissing(f"No such message: {message_id}", param="id")
        return found
