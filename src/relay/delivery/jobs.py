"""The values that travel between delivery's transactions and its submits."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from relay.carriers.base import OutboundSms
from relay.db.sql import Tx
from relay.delivery.owners import Draft, Told
from relay.delivery.store import AttemptRow
from relay.records import fast_init

if TYPE_CHECKING:
    from relay.delivery.at_once import Plan

# Run in the unit that records a send's last answer, with the owner as that unit left
# it and the moment: the request that created the owner keeps its answer there.
Then = Callable[[Tx, object, datetime], Awaitable[None]]


@fast_init
@dataclass(frozen=True)
class Job:
    """An attempt this process holds the lease for, with the SMS to submit."""

    attempt: AttemptRow
    sms: OutboundSms
    expires_at: datetime
    # Runs in the unit that records this job's last answer (failover passes it on).
    then: Then | None = None

    @classmethod
    def of(cls, attempt: AttemptRow, draft: Draft) -> Job:
        sms = OutboundSms(
            attempt_id=attempt.id,
            to=draft.to,
            sender=draft.sender,
            body=draft.body,
            passcode=draft.passcode,
            fallback_channel=attempt.fallback_channel,
        )
        return cls(attempt, sms, draft.expires_at)

    def following(self, attempt: AttemptRow) -> Job:
        """The failover attempt's job: the same message, under the new attempt's id."""
        sms = dataclasses.replace(
            self.sms, attempt_id=attempt.id, fallback_channel=attempt.fallback_channel
        )
        return Job(attempt, sms, self.expires_at, self.then)


@fast_init
@dataclass(frozen=True)
class Step:
    """What recording one answer left: the failover attempt it opened, the owner as loaded."""

    following: AttemptRow | None = None
    # The owner's snapshot as this transaction last loaded it (None: not loaded).
    latest: object | None = None


@fast_init
@dataclass(frozen=True)
class Submitted:
    """Where a send stands: the job still to submit over the network, or none.

    `latest` is the owner as the last transaction loaded it (None: read it again).
    """

    job: Job | None = None
    latest: object | None = None


@fast_init
@dataclass(frozen=True)
class Sending:
    """A send decided inside its owner's creating unit, nothing of it written yet."""

    plan: Plan
    told: Told

    @property
    def answer(self) -> object | None:
        """The owner as the creating request answers with it, once the send ends in this
        unit; None while a carrier that needs the network has still to take it."""
        return None if self.plan.job is not None else self.told.state.snapshot
