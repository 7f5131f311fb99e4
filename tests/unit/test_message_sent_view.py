"""A message as its answer and its events show it: `to_api` made once per record; as sent,
what `to_api` makes of it sent with that attempt sent, made from the view already shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from relay.delivery.attempts import Attempt, AttemptStatus
from relay.messages.models import Message, MessageStatus, as_shown, sent_from
from relay.records import changed

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_as_sent_it_is_shown_as_to_api_shows_it_sent_with_that_attempt_sent() -> None:
    attempts = tuple(
        Attempt(f"att_{n}", status, "sandbox", NOW, None, True, channel)
        for n, (status, channel) in enumerate(
            [
                (AttemptStatus.FAILED, "sms"),
                (AttemptStatus.DELIVERED, "whatsapp"),
                (AttemptStatus.QUEUED, "sms"),
            ]
        )
    )
    message = Message(
        "msg_1", "acct_1", True, "+14155552671", "US", "Relay", "en", MessageStatus.DELIVERED,
        {"k": "v"}, None, NOW, NOW, NOW + timedelta(minutes=10), attempts,
    )  # fmt: skip
    shown = message.to_api()
    before = orjson.dumps(shown)
    for attempt in attempts:
        sent = changed(
            message,
            status=MessageStatus.SENT,
            attempts=tuple(
                changed(a, status=AttemptStatus.SENT) if a is attempt else a for a in attempts
            ),
        )
        assert orjson.dumps(sent_from(shown, attempt.id)) == orjson.dumps(sent.to_api())
    assert orjson.dumps(shown) == before


def test_the_same_message_is_shown_once_and_a_changed_one_afresh() -> None:
    message = Message(
        "msg_1", "acct_1", True, "+14155552671", "US", "Relay", "en", MessageStatus.QUEUED,
        {}, None, NOW, NOW, NOW + timedelta(minutes=10),
    )  # fmt: skip
    first = as_shown(message)
    assert first == message.to_api()
    assert as_shown(message) is first
    sent = changed(message, status=MessageStatus.SENT)
    assert as_shown(sent) == sent.to_api()
    assert as_shown(sent)["status"] == "sent"
    assert first["status"] == "queued"
