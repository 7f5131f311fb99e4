"""A message as the owner of its attempts (`relay.delivery.owners.Owner`).

Delivery tells it what carriers answered; it moves its own status and records
its own events.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from relay.crypto import Keyring
from relay.db.sql import Tx
from relay.delivery.attempts import Attempt
from relay.delivery.owners import Answer, Draft, OwnerState, Told, as_answered, drafted
from relay.events import store as event_store
from relay.events.models import EventType
from relay.messages import store
from relay.messages.models import Message, MessageStatus, as_shown, sent_from
from relay.records import changed


def owner_state(message: Message) -> OwnerState:
    return OwnerState(
        account_id=message.account_id,
        livemode=message.livemode,
        country=message.country,
        expires_at=message.expires_at,
        is_open=message.is_open,
        snapshot=message,
    )


_TOLD = {
    "sent": EventType.MESSAGE_SENT,
    "delivered": EventType.MESSAGE_DELIVERED,
    "failed": EventType.MESSAGE_FAILED,
}


def _status_after(status: MessageStatus, answer: Answer) -> MessageStatus:
    """The message's own state after one answer (as `attempt_sent`, `attempt_delivered` and
    `attempt_failed` move it, one at a time)."""
    if answer.outcome == "delivered":
        return MessageStatus.DELIVERED
    if answer.outcome == "sent":
        return MessageStatus.SENT if status is MessageStatus.QUEUED else status
    open_ = status in (MessageStatus.QUEUED, MessageStatus.SENT)
    return MessageStatus.FAILED if answer.last and open_ else status


class MessageOwner:
    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring

    async def draft(self, tx: Tx, owner_id: str, *, now: datetime) -> Draft | None:
        return await drafted(tx, await store.sendable(tx, owner_id), self._keyring, now=now)

    async def state(self, tx: Tx, owner_id: str, *, now: datetime) -> OwnerState | None:
        message = await store.load_any(tx, owner_id)
        return None if message is None else owner_state(message)

    async def attempt_sent(self, tx: Tx, owner_id: str, *, now: datetime) -> OwnerState | None:
        await store.mark_sent(tx, owner_id, now=now)
        message = await store.load_any(tx, owner_id)
        if message is None:
            return None
        await _record(tx, message, EventType.MESSAGE_SENT, now)
        return owner_state(message)

    async def attempt_delivered(
        self, tx: Tx, owner_id: str, attempt_id: str, *, now: datetime, also_sent: bool
    ) -> OwnerState | None:
        # From queued or sent: the message's own state follows in one step.
        await store.finish(tx, owner_id, MessageStatus.DELIVERED, now=now)
        message = await store.load_any(tx, owner_id)
        if message is None:
            return None
        shown = message.to_api()
        if also_sent:
            await _record(tx, message, EventType.MESSAGE_SENT, now, sent_from(shown, attempt_id))
        await _record(tx, message, EventType.MESSAGE_DELIVERED, now, shown)
        return owner_state(message)

    async def attempt_failed(
        self, tx: Tx, owner_id: str, *, now: datetime, last: bool
    ) -> OwnerState | None:
        message = await store.load_any(tx, owner_id)
        if message is None:
            return None
        if last and message.is_open:
            # No carrier left: the message has failed, and says so in the same event.
            await store.finish(tx, owner_id, MessageStatus.FAILED, now=now)
            message = await store.load_any(tx, owner_id) or message
        await _record(tx, message, EventType.MESSAGE_FAILED, now)
        return owner_state(message)

    def told(
        self,
        opened: object,
        attempts: Sequence[Attempt],
        answers: Sequence[Answer],
        *,
        now: datetime,
    ) -> Told:
        """The message's own state after its answers is written with it, by its insert."""
        assert isinstance(opened, Message)
        message = changed(opened, attempts=(*opened.attempts, *attempts))
        status = message.status
        changes: list[tuple[EventType, dict[str, Any]]] = []
        shown = None
        for answer in answers:
            status = _status_after(status, answer)
            shown = changed(message, status=status, attempts=as_answered(message.attempts, answer))
            view = as_shown(shown)
            if answer.outcome == "delivered":
                changes.append((EventType.MESSAGE_SENT, sent_from(view, answer.attempt_id)))
            changes.append((_TOLD[answer.outcome], view))
        # The last answer's event shows the message as the send answers with it, when the
        # two are the same: the same record, shown once (`as_shown`).
        if shown is not None and shown.attempts == message.attempts:
            message = shown
        else:
            message = changed(message, status=status)
        return Told(owner_state(message), changes, message)

    async def attempt_canceled(self, tx: Tx, owner_id: str, *, now: datetime) -> None:
        await store.finish(tx, owner_id, MessageStatus.FAILED, now=now)


async def _record(
    tx: Tx,
    message: Message,
    kind: EventType,
    now: datetime,
    payload: dict[str, Any] | None = None,
) -> None:
    data = message.to_api() if payload is None else payload
    await event_store.record_about(tx, message, kind, now=now, data_object=data)
