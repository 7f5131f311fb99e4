"""The values that travel between delivery's transactions and its submits."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from relay.carriers.base import OutboundSms
from relay.delivery.owners import Draft
from relay.delivery.store import AttemptRow
from relay.records import fast_init


@fast_init
@dataclass(frozen=True)
class Job:
    """An attempt this process holds the lease for, with the SMS to submit."""

    attempt: AttemptRow
    sms: OutboundSms
    expires_at: datetime

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
        return Job(attempt, sms, self.expires_at)


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
