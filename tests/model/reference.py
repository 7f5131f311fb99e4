"""A reference model of the Verify and Send APIs, written from the spec and the contract
alone: what each request must answer and which events it must leave behind.

Nothing here imports Relay's domain code; the state machine compares the two.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

CHECK_LIMIT = 5
MAX_SENDS = 5
RESEND_INTERVAL = timedelta(seconds=30)
KEY_KEPT = timedelta(hours=24)
TEST_CODE = "000000"
SENT = ["sent", "delivered"]

CLOSED_CODES = {
    "approved": "verification_approved",
    "expired": "verification_expired",
    "canceled": "verification_canceled",
    "max_attempts_reached": "max_attempts_reached",
}


@dataclass
class Verification:
    id: str
    to: str
    code: str
    created_at: datetime
    expires_at: datetime
    # As stored: a pending verification past its TTL reads as expired before anything
    # writes it so (`status_at`), and its expiry event comes with that write.
    stored: str = "pending"
    checks: int = 0
    sends: int = 1
    last_sent_at: datetime | None = None
    approved_at: datetime | None = None
    canceled_at: datetime | None = None
    events: list[str] = field(default_factory=lambda: [f"verification.{e}" for e in SENT])

    def status_at(self, now: datetime) -> str:
        if self.stored == "pending" and now >= self.expires_at:
            return "expired"
        return self.stored

    def close_if_expired(self, now: datetime) -> None:
        if self.stored == "pending" and now >= self.expires_at:
            self.stored = "expired"
            self.events.append("verification.expired")


@dataclass(frozen=True)
class Expected:
    """An answer: its status, and its error code or the object it shows."""

    status: int
    code: str | None = None
    shows: str | None = None  # the id of the verification or message in a 200 body
    retry_after: int | None = None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any] | None

    def fingerprint(self) -> str:
        content = b"" if self.body is None else json.dumps(self.body).encode()
        return hashlib.sha256(f"{self.method} {self.path} ".encode() + content).hexdigest()


@dataclass(frozen=True)
class Kept:
    """An answer stored under an Idempotency-Key."""

    fingerprint: str
    status: int
    content: bytes
    at: datetime


def storable(status: int) -> bool:
    """Contract: 400, 401 and 429 and 5xx answers are not kept under a key."""
    return status < 500 and status not in (400, 401, 429)


class Model:
    def __init__(self, now: datetime) -> None:
        self.now = now
        self.verifications: dict[str, Verification] = {}
        self.messages: dict[str, list[str]] = {}
        self.keys: dict[str, Kept] = {}

    # --- idempotency -------------------------------------------------------------------

    def kept(self, key: str) -> Kept | None:
        found = self.keys.get(key)
        if found is None or found.at <= self.now - KEY_KEPT:
            return None
        return found

    def keep(self, key: str, request: Request, status: int, content: bytes) -> None:
        if storable(status):
            self.keys[key] = Kept(request.fingerprint(), status, content, self.now)

    # --- the Verify API ----------------------------------------------------------------

    def open_for(self, to: str) -> Verification | None:
        """The number's verification stored as pending, whether or not its TTL ran out."""
        return next(
            (v for v in self.verifications.values() if v.to == to and v.stored == "pending"), None
        )

    def create(self, to: str) -> Expected:
        """A create: a new verification, or a resend of the number's pending one."""
        current = self.open_for(to)
        if current is not None:
            current.close_if_expired(self.now)
            if current.stored != "pending":
                current = None
        if current is None:
            return Expected(200)  # `opened` records it once its id is known
        if current.sends >= MAX_SENDS:
            wait = (current.expires_at - self.now).total_seconds()
            return Expected(429, "max_sends_reached", retry_after=int(wait) + 1)
        assert current.last_sent_at is not None
        ready = current.last_sent_at + RESEND_INTERVAL
        if self.now < ready:
            wait = (ready - self.now).total_seconds()
            return Expected(429, "resend_too_soon", retry_after=-int(-wait // 1))
        current.sends += 1
        current.last_sent_at = self.now
        current.events += [f"verification.{e}" for e in SENT]
        return Expected(200, shows=current.id)

    def opened(self, verification_id: str, to: str, code: str, ttl: int) -> None:
        self.verifications[verification_id] = Verification(
            id=verification_id,
            to=to,
            code=code,
            created_at=self.now,
            expires_at=self.now + timedelta(seconds=ttl),
            last_sent_at=self.now,
        )

    def check(self, code: str, *, verification_id: str | None, to: str | None) -> Expected:
        target = (
            self.verifications.get(verification_id)
            if verification_id is not None
            else self.open_for(to or "")
        )
        if target is None:
            return Expected(404, "resource_missing")
        status = target.status_at(self.now)
        if status != "pending":
            target.close_if_expired(self.now)
            return Expected(409, CLOSED_CODES[status])
        target.checks += 1
        if code in (TEST_CODE, target.code):
            target.stored = "approved"
            target.approved_at = self.now
            target.events.append("verification.approved")
        elif target.checks >= CHECK_LIMIT:
            target.stored = "max_attempts_reached"
            target.events.append("verification.max_attempts_reached")
        return Expected(200, shows=target.id)

    def cancel(self, verification_id: str) -> Expected:
        target = self.verifications.get(verification_id)
        if target is None:
            return Expected(404, "resource_missing")
        status = target.status_at(self.now)
        if status == "pending":
            target.stored = "canceled"
            target.canceled_at = self.now
        if status in ("pending", "canceled"):
            return Expected(200, shows=target.id)
        target.close_if_expired(self.now)
        return Expected(409, CLOSED_CODES[status])

    def sweep(self) -> None:
        for verification in self.verifications.values():
            verification.close_if_expired(self.now)

    # --- the Send API ------------------------------------------------------------------

    def sent_message(self, message_id: str) -> None:
        self.messages[message_id] = [f"message.{e}" for e in SENT]
