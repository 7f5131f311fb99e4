"""A verification shown twice by one unit at one moment (its answer and its event) is
made once, and is always what `to_api` makes of that record at that moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from relay.records import changed
from relay.verifications.models import (
    Attempt,
    AttemptStatus,
    Status,
    Verification,
    as_shown,
    sent_from,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
VERIFICATION = Verification(
    "ver_1", "acct_1", False, "+14155552671", "US", "Relay", "en", 6, Status.PENDING, 0, 1,
    {"k": "v"}, None, NOW, NOW, NOW + timedelta(minutes=10), NOW, None, None,
)  # fmt: skip


def test_the_same_record_at_the_same_moment_is_shown_once() -> None:
    first = as_shown(VERIFICATION, NOW)
    assert first == VERIFICATION.to_api(NOW)
    assert as_shown(VERIFICATION, NOW) is first


def test_a_changed_record_or_another_moment_is_shown_afresh() -> None:
    first = as_shown(VERIFICATION, NOW)
    approved = changed(VERIFICATION, status=Status.APPROVED, checks=1, approved_at=NOW)
    assert as_shown(approved, NOW) == approved.to_api(NOW)
    assert as_shown(approved, NOW)["status"] == "approved"
    later = NOW + timedelta(minutes=11)
    assert as_shown(VERIFICATION, later) == VERIFICATION.to_api(later)
    assert as_shown(VERIFICATION, later)["status"] == "expired"
    assert first["status"] == "pending"


def test_an_equal_moment_that_is_another_object_is_shown_afresh() -> None:
    moment = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    first = as_shown(VERIFICATION, NOW)
    assert as_shown(VERIFICATION, moment) == first
    assert as_shown(VERIFICATION, moment) is not first


def test_as_sent_it_is_shown_as_to_api_shows_it_with_that_attempt_sent() -> None:
    attempts = tuple(
        Attempt(f"att_{n}", status, "sandbox", NOW, None, False, channel)
        for n, (status, channel) in enumerate(
            [
                (AttemptStatus.FAILED, "sms"),
                (AttemptStatus.DELIVERED, "whatsapp"),
                (AttemptStatus.QUEUED, "sms"),
            ]
        )
    )
    verification = VERIFICATION.with_attempts(attempts)
    shown = verification.to_api(NOW)
    before = orjson.dumps(shown)
    for attempt in attempts:
        sent = verification.with_attempts(
            tuple(changed(a, status=AttemptStatus.SENT) if a is attempt else a for a in attempts)
        )
        assert orjson.dumps(sent_from(shown, attempt.id)) == orjson.dumps(sent.to_api(NOW))
    assert orjson.dumps(shown) == before
