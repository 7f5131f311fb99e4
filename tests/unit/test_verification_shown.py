"""A verification shown twice by one unit at one moment (its answer and its event) is
made once, and is always what `to_api` makes of that record at that moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from relay.records import changed
from relay.verifications.models import Status, Verification, as_shown

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
