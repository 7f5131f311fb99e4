"""What the services count. A fact written in a transaction is counted once that
transaction has committed (`Tx.after_commit`), never for a unit rolled back.

Callers hand over labels only; no value here is ever a phone number, code or key.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client import Counter, Histogram

from relay.ids import created_ms
from relay.metrics import families as f

# Methods outside this set share one label: a client must not mint label values.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# A delivery still pending after an attempt failed and will be tried again.
_WEBHOOK_OUTCOMES = {"delivered": "delivered", "pending": "failed", "dropped": "dropped"}


class AfterCommit(Protocol):
    """The part of `relay.db.sql.Tx` this module uses."""

    def after_commit(self, callback: Callable[[], None]) -> None: ...


def _mode(livemode: bool) -> str:
    return "live" if livemode else "test"


def verification_created(tx: AfterCommit, *, livemode: bool, channel: str = "sms") -> None:
    tx.after_commit(f.VERIFICATIONS_CREATED.child(_mode(livemode), channel).inc)


def verification_approved(tx: AfterCommit, *, livemode: bool) -> None:
    tx.after_commit(f.VERIFICATIONS_APPROVED.child(_mode(livemode)).inc)


def sms_attempt(
    tx: AfterCommit, *, carrier: str, country: str, outcome: str, channel: str = "sms"
) -> None:
    tx.after_commit(f.SMS_ATTEMPTS.child(carrier, country, outcome, channel).inc)


def sms_receipt(tx: AfterCommit, *, carrier: str, attempt_id: str) -> None:
    """A final receipt for the attempt: timed from the attempt's id (made when it was queued)."""
    seconds = max(0.0, time.time() - created_ms(attempt_id) / 1000)
    tx.after_commit(functools.partial(f.SMS_RECEIPT.child(carrier).observe, seconds))


def webhook_attempt(delivery_status: str, *, seconds: float) -> None:
    """Called once the attempt's record has committed, with the delivery's status after it."""
    f.WEBHOOK_DELIVERIES.child(_WEBHOOK_OUTCOMES.get(delivery_status, "failed")).inc()
    f.WEBHOOK_DURATION.observe(seconds)


def http_request(route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in _METHODS else "OTHER"
    pair = _HTTP_CHILDREN.get((route, method, status))
    if pair is None:
        pair = _HTTP_CHILDREN[route, method, status] = (
            f.HTTP_REQUESTS.child(route, method, str(status)),
            f.HTTP_DURATION.child(route),
        )
    requests, duration = pair
    requests.inc()
    duration.observe(seconds)


# Every request counts one of each: both children found with one lookup. Routes,
# methods and statuses are the app's own (never a client's), so the pairs are few.
_HTTP_CHILDREN: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
