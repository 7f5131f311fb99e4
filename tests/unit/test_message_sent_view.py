"""A message as its message.sent event shows it: what `to_api` makes of it sent, with
that attempt sent, made from the view its answer or delivered event already shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from relay.delivery.attempts import Attempt, AttemptStatus
from relay.messages.models import Message, MessageStatus, sent_from
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
