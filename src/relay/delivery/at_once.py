"""Sends decided before anything is written, through carriers that answer without I/O.

The sandbox answers a submit in the same call, so the creating transaction can
write each attempt once, in its final state, instead of queueing it and then
recording the answer: one INSERT for every attempt of the send, failover
included. Walking the route stops at the first carrier that needs the
network (its attempt is written queued and leased to this process), at a
throttle (written queued, postponed), or at the first answer that ends the send.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeGuard

from relay.carriers import routing
from relay.carriers.base import AnswersAtOnce, CarrierError, SubmitReceipt
from relay.carriers.registry import CarrierSet
from relay.delivery import store
from relay.delivery.attempts import AttemptStatus
from relay.delivery.jobs import Job
from relay.delivery.owners import Answer
from relay.delivery.store import NewAttempt
from relay.records import fast_init
from relay.sms.encoding import segment_count


@dataclass
class Plan:
    attempts: list[NewAttempt] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    # The attempt left for a carrier that needs the network, leased to this process.
    job: Job | None = None
    throttled: bool = False


@fast_init
@dataclass(frozen=True)
class Leases:
    owner: str
    length: timedelta
    receipt_timeout: float
    docs: str
    # An SMS that would take more segments is never submitted (`too_long`).
    max_segments: int = 3


# A body of at most this many characters per allowed segment fits without counting:
# no character takes more than 2 units (a UCS-2 surrogate pair, a GSM-7 escape), and a
# part of a long SMS holds 67 UCS-2 units (153 septets), a pair never split across two.
FITS_PER_SEGMENT = 33


def too_long(carrier: object, job: Job, leases: Leases, *, now: datetime) -> routing.Fail | None:
    """The failure of an SMS longer than `max_segments`, decided before any submit, or None.

    Own texts are refused at that length when set; this catches what changed since
    (the brand, the WebOTP domain, the setting), at the cost of counting a long body.
    Failover goes on: the next SMS carrier fails the same way, another channel sends.
    """
    if getattr(carrier, "channel", None) != "sms":
        return None
    body = job.sms.body
    if len(body) <= FITS_PER_SEGMENT * leases.max_segments:
        return None
    if segment_count(body) <= leases.max_segments:
        return None
    attempt = job.attempt
    return routing.after_failure(
        routing.SMS_TOO_LONG,
        attempt.route,
        attempt.position,
        now=now,
        expires_at=job.expires_at,
        docs=leases.docs,
    )


# Runs a callback once the unit of work asking has committed (`Tx.after_commit`).
AfterCommit = Callable[[Callable[[], None]], None]


def plan(
    carriers: CarrierSet, first: Job, leases: Leases, *, now: datetime, after_commit: AfterCommit
) -> Plan:
    """Submit along the route while carriers answer at once; say what to write. What a
    carrier does with a message it took waits for the commit (`after_commit`): nothing
    of a unit that rolls back reaches one."""
    planned = Plan()
    job: Job | None = first
    while job is not None:
        job = _step(carriers, job, leases, planned, now, after_commit)
    return planned


def _step(
    carriers: CarrierSet,
    job: Job,
    leases: Leases,
    planned: Plan,
    now: datetime,
    after_commit: AfterCommit,
) -> Job | None:
    attempt = job.attempt
    carrier = carriers.carriers.get(attempt.carrier)
    oversized = too_long(carrier, job, leases, now=now)
    if oversized is not None:
        return _failed(job, oversized, None, planned)
    if not _answers_at_once(carrier):
        until = now + leases.length
        planned.attempts.append(NewAttempt(attempt, lease_owner=leases.owner, lease_until=until))
        planned.job = job
        return None
    try:
        receipt = carrier.answer_now(job.sms)
    except CarrierError as error:
        decision = routing.after_submit_error(
            error,
            attempt.route,
            attempt.position,
            now=now,
            expires_at=job.expires_at,
            docs=leases.docs,
        )
        if isinstance(decision, routing.Wait):
            # Free for any dispatcher once the throttle has passed.
            planned.attempts.append(NewAttempt(attempt, lease_until=decision.until))
            planned.throttled = True
            return None
        return _failed(job, decision, None, planned)
    after_commit(functools.partial(carrier.took, job.sms, receipt))
    return _answered(carriers, job, receipt, leases, planned, now)


def _answered(
    carriers: CarrierSet,
    job: Job,
    receipt: SubmitReceipt,
    leases: Leases,
    planned: Plan,
    now: datetime,
) -> Job | None:
    attempt, carrier_message_id = job.attempt, receipt.carrier_message_id
    segments = receipt.billed(job.sms.body)
    final = receipt.final
    if final is not None and final.status == "delivered":
        delivered = attempt.answered(AttemptStatus.DELIVERED, carrier_message_id)
        planned.attempts.append(NewAttempt(delivered, segments=segments))
        planned.answers.append(Answer(attempt.id, "delivered"))
        return None
    planned.answers.append(Answer(attempt.id, "sent"))
    if final is None:
        timeout = carriers.receipt_timeout(attempt.carrier, leases.receipt_timeout)
        due = now + timedelta(seconds=timeout)
        sent = attempt.answered(AttemptStatus.SENT, carrier_message_id)
        planned.attempts.append(NewAttempt(sent, report_due_at=due, segments=segments))
        return None
    failure = routing.after_failure(
        routing.SMS_UNDELIVERABLE,
        attempt.route,
        attempt.position,
        now=now,
        expires_at=job.expires_at,
        carrier_code=final.error_code,
        docs=leases.docs,
    )
    return _failed(job, failure, receipt.carrier_message_id, planned, segments=segments)


def _failed(
    job: Job,
    failure: routing.Fail,
    carrier_message_id: str | None,
    planned: Plan,
    *,
    segments: int | None = None,
) -> Job | None:
    attempt = job.attempt.answered(AttemptStatus.FAILED, carrier_message_id)
    planned.attempts.append(NewAttempt(attempt, error=failure.error, segments=segments))
    position = failure.next_position
    planned.answers.append(Answer(attempt.id, "failed", last=position is None))
    if position is None:
        return None
    return job.following(store.queued(attempt.owner, attempt.route, position, attempt.channels))


# isinstance() against a runtime-checkable Protocol walks the protocol's members
# on every call, and this runs on every send; a class's answer holds.
_ANSWERS_AT_ONCE: dict[type, bool] = {}


def _answers_at_once(carrier: object) -> TypeGuard[AnswersAtOnce]:
    kind = type(carrier)
    found = _ANSWERS_AT_ONCE.get(kind)
    if found is None:
        found = _ANSWERS_AT_ONCE[kind] = issubclass(kind, AnswersAtOnce)
    return found
