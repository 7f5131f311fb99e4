"""The verification state machine, pure: every rule takes `now`."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import orjson

from relay.carriers.base import Channel
from relay.clock import isoformat
from relay.delivery.attempts import Attempt, AttemptStatus, shown_as_sent
from relay.errors import (
    MaxAttemptsReached,
    MaxSendsReached,
    ResendTooSoon,
    VerificationApproved,
    VerificationCanceled,
    VerificationClosed,
    VerificationExpired,
)
from relay.records import changed, fast_init

__all__ = ["Attempt", "AttemptStatus", "Status", "Verification"]

CHECK_LIMIT = 5
TEST_CODE = "000000"


class Status(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    EXPIRED = "expired"
    CANCELED = "canceled"
    MAX_ATTEMPTS_REACHED = "max_attempts_reached"


@fast_init
@dataclass(frozen=True)
class Verification:
    id: str
    account_id: str
    livemode: bool
    to: str
    country: str
    sender: str
    locale: str
    code_length: int
    status: Status
    checks: int
    sends: int
    metadata: dict[str, str]
    webhook_url: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    last_sent_at: datetime
    approved_at: datetime | None
    canceled_at: datetime | None
    attempts: tuple[Attempt, ...] = ()
    # The channels its latest send asked for, in order (a resend asks again).
    channels: tuple[Channel, ...] = ("sms",)

    def with_attempts(self, attempts: tuple[Attempt, ...]) -> Verification:
        return changed(self, attempts=attempts)

    @property
    def channel(self) -> str:
        """Its latest attempt's channel (the first asked for, before any attempt)."""
        return self.attempts[-1].channel if self.attempts else self.channels[0]

    def last_sent_on(self, channel: str) -> datetime | None:
        """When an attempt last went out on `channel`, if one did."""
        return max((a.at for a in self.attempts if a.channel == channel), default=None)

    def status_at(self, now: datetime) -> Status:
        """A pending verification past its TTL is expired, whether or not the sweep ran."""
        if self.status is Status.PENDING and now >= self.expires_at:
            return Status.EXPIRED
        return self.status

    def to_api(self, now: datetime) -> dict[str, Any]:
        # `status_at` and `channel` inline: every answer and event shows one.
        status = self.status
        if status is Status.PENDING and now >= self.expires_at:
            status = Status.EXPIRED
        attempts = self.attempts
        approved_at, canceled_at = self.approved_at, self.canceled_at
        return {
            "id": self.id,
            "object": "verification",
            "livemode": self.livemode,
            "status": _STATUS_TEXT[status],
            "to": self.to,
            "channel": attempts[-1].channel if attempts else self.channels[0],
            # An email address has no country.
            "country": self.country or None,
            "sender": self.sender,
            "locale": self.locale,
            "code_length": self.code_length,
            "verified": status is Status.APPROVED,
            "remaining_checks": max(0, CHECK_LIMIT - self.checks),
            "attempts": [attempt.to_api() for attempt in attempts],
            "metadata": self.metadata,
            "webhook_url": self.webhook_url,
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
            "expires_at": isoformat(self.expires_at),
            "approved_at": None if approved_at is None else isoformat(approved_at),
            "canceled_at": None if canceled_at is None else isoformat(canceled_at),
        }


# An enum's `.value` is a Python property: read per answer, an event and a list's row.
_STATUS_TEXT = {status: status.value for status in Status}


class _Shown:
    """The last verification `as_shown` made, the moment it was shown at, and how."""

    last: tuple[Verification | None, datetime | None, dict[str, Any]] = (None, None, {})
    # The last view rendered as JSON, held by identity as `last` holds its record.
    rendered: tuple[dict[str, Any] | None, bytes] = (None, b"")


def as_shown(verification: Verification, now: datetime) -> dict[str, Any]:
    """`verification.to_api(now)`, made once for this very record and moment: a unit that
    answers with a verification and records an event about it as it answers (an approving
    check) shows it twice. Held by identity, the record held with it; nothing changes a
    record or what this returns once made."""
    last, at, view = _Shown.last
    if last is verification and at is now:
        return view
    view = verification.to_api(now)
    _Shown.last = (verification, now, view)
    return view


def shown_json(verification: Verification, now: datetime) -> bytes:
    """`as_shown(verification, now)` as JSON, rendered once: an answer's body and its
    unit's event about the same record at the same moment carry the same bytes."""
    view = as_shown(verification, now)
    kept, rendered = _Shown.rendered
    if kept is view:
        return rendered
    rendered = orjson.dumps(view)
    _Shown.rendered = (view, rendered)
    return rendered


def sent_from(shown: dict[str, Any], attempt_id: str) -> dict[str, Any]:
    """As events show a verification when `attempt_id` was sent, before that attempt's
    receipt, from `shown`, its `to_api` now: only that attempt's status differs."""
    return {**shown, "attempts": shown_as_sent(shown["attempts"], attempt_id)}


_CLOSED_ERRORS: dict[Status, type[VerificationClosed]] = {
    Status.APPROVED: VerificationApproved,
    Status.EXPIRED: VerificationExpired,
    Status.CANCELED: VerificationCanceled,
    Status.MAX_ATTEMPTS_REACHED: MaxAttemptsReached,
}


def closed_error(status: Status) -> VerificationClosed:
    return _CLOSED_ERRORS[status]()


def require_resend_allowed(
    verification: Verification,
    *,
    now: datetime,
    max_sends: int,
    interval: int,
    channel: str = "sms",
) -> None:
    """A resend reuses the pending verification; money caps how often it may happen.

    `max_sends` counts every send, on any channel. The interval is per destination
    and channel: a resend first on the channel the last send began with waits from
    that send; one first on another channel waits from that channel's latest attempt
    (none yet: no wait), so switching channels never skips a channel's interval.
    """
    if verification.sends >= max_sends:
        wait = (verification.expires_at - now).total_seconds()
        raise MaxSendsReached(retry_after=int(wait) + 1)
    if channel == verification.channels[0]:
        last: datetime | None = verification.last_sent_at
    else:
        last = verification.last_sent_on(channel)
    if last is None:
        return
    ready_at = last + timedelta(seconds=interval)
    if now < ready_at:
        wait = (ready_at - now).total_seconds()
        raise ResendTooSoon(retry_after=int(wait) + (0 if wait.is_integer() else 1))


class Moved(Exception):
    """The verification changed between a unit's read and its write, so what the unit
    decided (and the answer it kept under an Idempotency-Key) no longer holds: the unit
    rolls back, and the request runs again on what it reads then. Each time, another
    request counted a check or closed the verification, which happens a bounded number
    of times (`RERUNS`)."""


# Checks count at most CHECK_LIMIT times and a verification closes once: a request
# whose unit lost that many races in a row runs once more and then fails.
RERUNS = CHECK_LIMIT + 2


@fast_init
@dataclass(frozen=True)
class CountedCheck:
    """The verification after a counted check."""

    status: Status
    checks: int

    @property
    def closes(self) -> bool:
        """A closed verification never sends again: its sealed code is dropped."""
        return self.status is not Status.PENDING


def count_check(
    *, status: Status, checks: int, expires_at: datetime, now: datetime, correct: bool
) -> CountedCheck | None:
    """The check rule. None: the check is not counted and nothing changes.

    Only a pending verification within its TTL and under CHECK_LIMIT checks
    counts a check; every check counts, right or wrong, so a guesser gets at
    most CHECK_LIMIT tries. A right code approves it; the wrong code that
    reaches the limit closes it. Every other status is terminal and stays so.
    `verifications.store.count_check` makes this rule one atomic UPDATE, so
    concurrent checks cannot count more than CHECK_LIMIT between them.
    """
    if status is not Status.PENDING or now >= expires_at or checks >= CHECK_LIMIT:
        return None
    counted = checks + 1
    if correct:
        return CountedCheck(Status.APPROVED, counted)
    if counted >= CHECK_LIMIT:
        return CountedCheck(Status.MAX_ATTEMPTS_REACHED, counted)
    return CountedCheck(Status.PENDING, counted)


def check_is_correct(*, submitted: str, livemode: bool, matches: bool) -> bool:
    """Test keys also accept the fixed sandbox code, so integrations can be scripted."""
    return matches or (not livemode and submitted == TEST_CODE)


@functools.lru_cache(maxsize=1024)  # per brand, as `sms.text.sanitize_brand`
def sender_name(brand: str) -> str:
    """Alphanumeric sender ids are at most 11 letters, digits and spaces on most networks."""
    cleaned = re.sub(r"[^A-Za-z0-9 ]", "", brand).strip()[:11].strip()
    return cleaned or "Relay"


def resource_path(verification_id: str) -> str:
    """Where GET shows it: a retry under the key of a request that changed it, and died
    before answering, is answered from there."""
    return f"/v1/verifications/{verification_id}"
