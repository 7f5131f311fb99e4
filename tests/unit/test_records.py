"""A frozen record copied with fields changed is what dataclasses.replace makes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from relay.delivery.attempts import Attempt, AttemptStatus
from relay.delivery.store import AttemptRow
from relay.records import changed
from relay.verifications.models import Status, Verification

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
ATTEMPT = Attempt("att_1", AttemptStatus.QUEUED, "sandbox", NOW, None, livemode=False)
ROW = AttemptRow(
    "att_1", "ver_1", None, "sandbox", AttemptStatus.QUEUED, ("sandbox",), 0, None, ("sms",)
)
VERIFICATION = Verification(
    "ver_1", "acct_1", False, "+14155552671", "US", "Relay", "en", 6, Status.PENDING, 0, 1,
    {"k": "v"}, None, NOW, NOW, NOW, NOW, None, None,
)  # fmt: skip


def test_a_verification_with_attempts_is_the_replaced_one() -> None:
    copied = VERIFICATION.with_attempts((ATTEMPT,))
    assert copied == dataclasses.replace(VERIFICATION, attempts=(ATTEMPT,))
    assert VERIFICATION.attempts == ()
    assert copied.metadata is VERIFICATION.metadata


def test_an_attempt_with_a_status_and_an_answered_row_are_the_replaced_ones() -> None:
    assert ATTEMPT.with_status(AttemptStatus.SENT) == dataclasses.replace(
        ATTEMPT, status=AttemptStatus.SENT
    )
    assert ROW.answered(AttemptStatus.DELIVERED, "c-1") == dataclasses.replace(
        ROW, status=AttemptStatus.DELIVERED, carrier_message_id="c-1"
    )
    assert ATTEMPT.status is AttemptStatus.QUEUED


def test_a_copy_stays_frozen_and_hashes_as_its_equal() -> None:
    copied = ATTEMPT.with_status(AttemptStatus.FAILED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.status = AttemptStatus.SENT  # type: ignore[misc]
    assert hash(copied) == hash(dataclasses.replace(ATTEMPT, status=AttemptStatus.FAILED))


def test_a_field_the_record_does_not_have_is_refused() -> None:
    with pytest.raises(TypeError, match="Attempt has no field colour"):
        changed(ATTEMPT, colour="red")


@dataclass(frozen=True)
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@dataclass(frozen=True)
class Derived:
    value: int
    twice: int = field(init=False, default=0)


@pytest.mark.parametrize("record", [Checked(1), Derived(1)])
def test_a_record_its_init_would_check_or_derive_is_not_copied_this_way(record: object) -> None:
    with pytest.raises(TypeError, match=r"Checked|Derived"):
        changed(record, value=2)
