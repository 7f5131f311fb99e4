"""What delivery knows of what it delivers: an attempt's owner, through this interface only.

A verification or a message owns its attempts. Delivery decides when and
through which carrier an SMS goes, and records what carriers answer; the
owner builds the SMS, says whether it may still be sent, and, told of each
answer, updates its own state and records its own events, in the same
transaction. Implementations live with the owners (verifications, messages)
and are handed to `Delivery` by the composition root (`relay.services`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from relay.accounts import template_store
from relay.carriers.base import Passcode
from relay.crypto import Keyring
from relay.db.sql import Row, Tx, flag, moment
from relay.delivery.attempts import Attempt, AttemptStatus
from relay.events.models import EventType, Shown
from relay.events.store import Subject
from relay.records import fast_init
from relay.sms.custom import NO_TEMPLATES, CustomTemplates, render_text
from relay.sms.text import sanitize_brand, with_webotp_line

# The attempts table keeps its owner in one of two columns, one per kind.
Kind = Literal["verification", "message"]


@fast_init
@dataclass(frozen=True)
class OwnerRef:
    kind: Kind
    id: str


@fast_init
@dataclass(frozen=True)
class Draft:
    """An owner's SMS before it is given to an attempt. `body` holds the code: never log it."""

    to: str
    sender: str
    body: str
    # No attempt is submitted from this moment on: sending later would only cost money.
    expires_at: datetime
    passcode: Passcode | None = None

    @classmethod
    def render(
        cls,
        *,
        to: str,
        sender: str,
        locale: str,
        brand: str,
        code: str,
        webotp_domain: str | None,
        expires_at: datetime,
        now: datetime,
        custom: CustomTemplates = NO_TEMPLATES,
    ) -> Draft:
        """The SMS text, and the parts a channel with its own format builds from.

        The account's own text for the locale (`custom`), else Relay's, for every channel.
        """
        passcode = Passcode(
            code=code,
            brand=sanitize_brand(brand),
            locale=locale,
            expires_at=expires_at,
            templates=custom.for_locale(locale),
        )
        words = render_text(passcode, "sms", now=now)
        body = with_webotp_line(words, code, webotp_domain)
        return cls(to=to, sender=sender, body=body, expires_at=expires_at, passcode=passcode)


@fast_init
@dataclass(frozen=True)
class Sendable:
    """What an owner's SMS is built from, as its row keeps it. `sealed_code` holds the code."""

    owner_id: str
    account_id: str
    to: str
    sender: str
    locale: str
    sealed_code: bytes | None
    expires_at: datetime
    brand: str
    webotp_domain: str | None
    # The account has texts of its own: the owner loads them before drafting.
    has_templates: bool = False

    @classmethod
    def from_row(cls, owner_id: str, row: Row) -> Sendable:
        """From account_id, to_number, sender, locale, sealed_code, expires_at, brand,
        webotp_domain, has_templates."""
        sealed = row["sealed_code"]
        return cls(
            owner_id=owner_id,
            account_id=row["account_id"],
            to=row["to_number"],
            sender=row["sender"],
            locale=row["locale"],
            sealed_code=None if sealed is None else bytes(sealed),
            expires_at=moment(row["expires_at"]),
            brand=row["brand"],
            webotp_domain=row["webotp_domain"],
            has_templates=flag(row["has_templates"]),
        )

    def draft(
        self, keyring: Keyring, *, now: datetime, custom: CustomTemplates = NO_TEMPLATES
    ) -> Draft | None:
        """The SMS, or None once the code has been erased (the owner closed)."""
        if self.sealed_code is None:
            return None
        return Draft.render(
            to=self.to,
            sender=self.sender,
            locale=self.locale,
            brand=self.brand,
            code=keyring.unseal(self.owner_id, self.sealed_code),
            webotp_domain=self.webotp_domain,
            expires_at=self.expires_at,
            now=now,
            custom=custom,
        )


async def drafted(
    tx: Tx, found: Sendable | None, keyring: Keyring, *, now: datetime
) -> Draft | None:
    """An owner's SMS from its row, in the account's own words when it has some."""
    if found is None:
        return None
    if not found.has_templates:
        return found.draft(keyring, now=now)
    custom = await template_store.load(tx, found.account_id)
    return found.draft(keyring, now=now, custom=custom)


Outcome = Literal["sent", "delivered", "failed"]


@fast_init
@dataclass(frozen=True)
class Answer:
    """What a carrier answered for one attempt, in the order the owner is told.

    `delivered` also means sent: the owner records both. `last`: a failure after
    which no carrier is left to fail over to.
    """

    attempt_id: str
    outcome: Outcome
    last: bool = False


_SHOWN: dict[Outcome, AttemptStatus] = {
    "sent": AttemptStatus.SENT,
    "delivered": AttemptStatus.DELIVERED,
    "failed": AttemptStatus.FAILED,
}


def as_answered(attempts: tuple[Attempt, ...], answer: Answer) -> tuple[Attempt, ...]:
    """The attempts as an event about `answer` shows them: those opened before it and
    it, in the state that answer left it (a later answer may have moved it on)."""
    shown: list[Attempt] = []
    for attempt in attempts:
        if attempt.id == answer.attempt_id:
            shown.append(attempt.with_status(_SHOWN[answer.outcome]))
            break
        shown.append(attempt)
    return tuple(shown)


@fast_init
@dataclass(frozen=True)
class OwnerState:
    """An owner as it stood after the change it was told of."""

    account_id: str
    livemode: bool
    country: str
    expires_at: datetime
    # May another attempt still be sent (a pending verification, an unfinished message)?
    is_open: bool
    # The owner as loaded (a Verification, a Message): handed back to whoever sent,
    # so a request can answer without reading it again. Delivery never looks inside.
    snapshot: object


@fast_init
@dataclass(frozen=True)
class Told:
    """An owner after its send's answers, before anything is written: how it stands,
    and the events (type, the owner as each shows it) it records about them."""

    state: OwnerState
    events: Sequence[tuple[EventType, Shown]]
    # What the events are about: the owner itself.
    subject: Subject


class Owner(Protocol):
    """One kind of attempt owner. Every method runs inside the caller's transaction."""

    async def draft(self, tx: Tx, owner_id: str, *, now: datetime) -> Draft | None:
        """The SMS to (re)submit for an attempt; None once the owner is closed."""
        ...

    async def state(self, tx: Tx, owner_id: str, *, now: datetime) -> OwnerState | None: ...

    async def attempt_sent(self, tx: Tx, owner_id: str, *, now: datetime) -> OwnerState | None:
        """A carrier took one of its attempts; no final receipt yet."""
        ...

    async def attempt_delivered(
        self, tx: Tx, owner_id: str, attempt_id: str, *, now: datetime, also_sent: bool
    ) -> OwnerState | None:
        """`attempt_id` was delivered. `also_sent`: its sending was not told before."""
        ...

    async def attempt_failed(
        self, tx: Tx, owner_id: str, *, now: datetime, last: bool
    ) -> OwnerState | None:
        """An attempt failed. `last`: no carrier is left to fail over to."""
        ...

    async def attempt_canceled(self, tx: Tx, owner_id: str, *, now: datetime) -> None:
        """A queued attempt was dropped unsent: its owner closed or expired meanwhile."""
        ...

    def told(
        self,
        opened: object,
        attempts: Sequence[Attempt],
        answers: Sequence[Answer],
        *,
        now: datetime,
    ) -> Told:
        """In its creating transaction, before anything of the send is written: the owner
        after the attempts its send opened (each in its final state) and what carriers
        that needed no I/O answered for them, in order, with the events it records.

        `opened` is the owner's snapshot as that transaction makes it, without these
        attempts: nothing is read back, and nothing here writes.
        """
        ...
