"""A verification as the owner of its attempts (`relay.delivery.owners.Owner`).

Delivery tells it what carriers answered; it records its own events.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from relay.crypto import Keyring
from relay.db.sql import Tx
from relay.delivery.attempts import Attempt
from relay.delivery.owners import Answer, Draft, OwnerState, Told, as_answered, drafted
from relay.events.models import EventType, Shown
from relay.verifications import events, store
from relay.verifications.models import Status, Verification, as_shown, sent_from, shown_json


def owner_state(verification: Verification, now: datetime) -> OwnerState:
    return OwnerState(
        account_id=verification.account_id,
        livemode=verification.livemode,
        country=verification.country,
        expires_at=verification.expires_at,
        is_open=verification.status_at(now) is Status.PENDING,
        snapshot=verification,
    )


_TOLD = {
    "sent": EventType.VERIFICATION_SENT,
    "delivered": EventType.VERIFICATION_DELIVERED,
    "failed": EventType.VERIFICATION_FAILED,
}


class VerificationOwner:
    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring

    async def draft(self, tx: Tx, owner_id: str, *, now: datetime) -> Draft | None:
        return await drafted(tx, await store.sendable(tx, owner_id), self._keyring, now=now)

    async def state(self, tx: Tx, owner_id: str, *, now: datetime) -> OwnerState | None:
        verification = await store.load_any(tx, owner_id)
        return None if verification is None else owner_state(verification, now)

    async def attempt_sent(self, tx: Tx, owner_id: str, *, now: datetime) -> OwnerState | None:
        return await self._told(tx, owner_id, EventType.VERIFICATION_SENT, now)

    async def attempt_delivered(
        self, tx: Tx, owner_id: str, attempt_id: str, *, now: datetime, also_sent: bool
    ) -> OwnerState | None:
        verification = await store.load_any(tx, owner_id)
        if verification is None:
            return None
        if also_sent:
            sent = sent_from(as_shown(verification, now), attempt_id)
            await events.record(tx, verification, EventType.VERIFICATION_SENT, now, payload=sent)
        await events.record(tx, verification, EventType.VERIFICATION_DELIVERED, now)
        return owner_state(verification, now)

    async def attempt_failed(
        self, tx: Tx, owner_id: str, *, now: datetime, last: bool
    ) -> OwnerState | None:
        # The last carrier failing leaves it pending: the caller may resend.
        return await self._told(tx, owner_id, EventType.VERIFICATION_FAILED, now)

    def told(
        self,
        opened: object,
        attempts: Sequence[Attempt],
        answers: Sequence[Answer],
        *,
        now: datetime,
    ) -> Told:
        assert isinstance(opened, Verification)
        # The last carrier failing leaves it pending: the caller may resend.
        verification = opened.with_attempts((*opened.attempts, *attempts))
        changes: list[tuple[EventType, Shown]] = []
        for answer in answers:
            attempts = as_answered(verification.attempts, answer)
            # The last answer's event shows the verification as the create answers with it:
            # the same record, shown once (`shown_json`).
            same = attempts == verification.attempts
            shown = verification if same else verification.with_attempts(attempts)
            view = as_shown(shown, now)
            if answer.outcome == "delivered":
                changes.append((EventType.VERIFICATION_SENT, sent_from(view, answer.attempt_id)))
            changes.append((_TOLD[answer.outcome], shown_json(shown, now)))
        return Told(owner_state(verification, now), changes, verification)

    async def attempt_canceled(self, tx: Tx, owner_id: str, *, now: datetime) -> None:
        return None  # it closed first, and said so then

    async def _told(
        self, tx: Tx, owner_id: str, kind: EventType, now: datetime
    ) -> OwnerState | None:
        verification = await store.load_any(tx, owner_id)
        if verification is None:
            return None
        await events.record(tx, verification, kind, now)
        return owner_state(verification, now)
