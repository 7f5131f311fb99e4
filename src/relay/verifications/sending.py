"""A verification as the owner of its attempts (`relay.delivery.owners.Owner`).

Delivery tells it what carriers answered; it records its own events.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from relay.crypto import Keyring
from relay.delivery.owners import Draft, OwnerState
from relay.events.models import EventType
from relay.sms.text import render_sms
from relay.verifications import events, store
from relay.verifications.models import Status, Verification, just_sent


def owner_state(verification: Verification, now: datetime) -> OwnerState:
    return OwnerState(
        account_id=verification.account_id,
        livemode=verification.livemode,
        country=verification.country,
        expires_at=verification.expires_at,
        is_open=verification.status_at(now) is Status.PENDING,
        snapshot=verification,
    )


class VerificationOwner:
    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring

    def draft(self, conn: Connection, owner_id: str) -> Draft | None:
        found = store.sendable(conn, owner_id)
        if found is None or found.sealed_code is None:
            return None
        code = self._keyring.unseal(owner_id, found.sealed_code)
        body = render_sms(
            locale=found.locale, brand=found.brand, code=code, webotp_domain=found.webotp_domain
        )
        return Draft(to=found.to, sender=found.sender, body=body, expires_at=found.expires_at)

    def state(self, conn: Connection, owner_id: str, *, now: datetime) -> OwnerState | None:
        verification = store.load_any(conn, owner_id)
        return None if verification is None else owner_state(verification, now)

    def attempt_sent(self, conn: Connection, owner_id: str, *, now: datetime) -> OwnerState | None:
        return self._told(conn, owner_id, EventType.VERIFICATION_SENT, now)

    def attempt_delivered(
        self, conn: Connection, owner_id: str, attempt_id: str, *, now: datetime, also_sent: bool
    ) -> OwnerState | None:
        verification = store.load_any(conn, owner_id)
        if verification is None:
            return None
        if also_sent:
            sent = just_sent(verification, attempt_id, now)
            events.record(conn, verification, EventType.VERIFICATION_SENT, now, payload=sent)
        events.record(conn, verification, EventType.VERIFICATION_DELIVERED, now)
        return owner_state(verification, now)

    def attempt_failed(
        self, conn: Connection, owner_id: str, *, now: datetime, last: bool
    ) -> OwnerState | None:
        # The last carrier failing leaves it pending: the caller may resend.
        return self._told(conn, owner_id, EventType.VERIFICATION_FAILED, now)

    def attempt_canceled(self, conn: Connection, owner_id: str, *, now: datetime) -> None:
        return None  # it closed first, and said so then

    def _told(
        self, conn: Connection, owner_id: str, kind: EventType, now: datetime
    ) -> OwnerState | None:
        verification = store.load_any(conn, owner_id)
        if verification is None:
            return None
        events.record(conn, verification, kind, now)
        return owner_state(verification, now)
