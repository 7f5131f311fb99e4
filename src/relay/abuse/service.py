"""Abuse checks, called inside the senders' units of work so counts and sends agree.

Each `before_*` returns the refusal instead of raising it: a pumping block must be
written in the same unit of work that refuses the send, and a raise would roll it back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from datetime import datetime

from relay.abuse import store
from relay.abuse.models import (
    BUCKET,
    DAY,
    HOUR,
    Bucket,
    GuardMode,
    Kind,
    Rules,
    Totals,
    bucket_of,
    looks_like_pumping,
    prefix_of,
    redacted_prefix,
    seconds_until,
    step_of,
    wait_for_buckets,
    wait_for_times,
    window_start,
)
from relay.accounts.models import Scope
from relay.db.sql import Tx
from relay.errors import (
    DailyCapReached,
    DestinationBlocked,
    RateLimitError,
    TooManyFailedChecks,
    TooManyVerifications,
)
from relay.phone import Destination

log = logging.getLogger("relay.abuse")


class AbuseGuard:
    def __init__(self, rules: Rules) -> None:
        self.rules = rules

    async def look(
        self,
        tx: Tx,
        scope: Scope,
        destination: Destination,
        *,
        now: datetime,
        channel: str = "sms",
        texts: bool = False,
    ) -> store.SendContext:
        """Everything a send is decided on, and the number's pending verification, in one
        round trip. `channel`: the one the send asks for first (verifications per hour
        count per destination and channel); `texts`: the account has texts of its own,
        read in the same statement."""
        # An email address counts as its mailbox: its spellings share one destination.
        number, day, hour = destination.key, window_start(now, DAY), window_start(now, HOUR)
        account_day = window_start(now, DAY, step_of(Kind.ACCOUNT))
        # An email address has no prefix or country: its read names subjects that
        # nothing writes, so the one statement keeps its shape.
        subjects = self._subjects(destination) or _NO_SUBJECTS
        return await store.before_send(
            tx,
            scope,
            number,
            [
                (Kind.NUMBER, number, day),
                *((kind, subject, hour) for kind, subject in subjects),
                (Kind.ACCOUNT, "", account_day),
            ],
            subjects,
            opened_since=now - HOUR,
            # The cap looks at the newest `cap` of them (`_too_many_verifications`).
            recent=self._verifications_cap(scope),
            channel=channel,
            texts=texts,
        )

    async def refusal(
        self,
        tx: Tx,
        scope: Scope,
        destination: Destination,
        seen: store.SendContext,
        *,
        opens: bool,
        now: datetime,
    ) -> RateLimitError | None:
        """The decision on what `look` saw. Writes only a new pumping block."""
        number = destination.key
        failed = seen.counters[(Kind.NUMBER, number)].failed_checks
        return (
            (self._too_many_verifications(seen, scope, now) if opens else None)
            or await self.before_check(tx, scope, number, failed_checks=failed, now=now)
            or await self._pumping(tx, scope, destination, seen, now)
            or await self._daily_cap(tx, scope, seen.counters[(Kind.ACCOUNT, "")].sends, now)
        )

    async def record_send(
        self, tx: Tx, scope: Scope, destination: Destination, *, now: datetime
    ) -> None:
        rows = [(kind, subject, 1, 0, 0) for kind, subject in self._subjects(destination)]
        await store.bump_many(tx, scope, [*rows, (Kind.ACCOUNT, "", 1, 0, 0)], at=now)

    def failed_checks_since(self, now: datetime) -> datetime:
        """Where the window of wrong codes per number starts (`store.failed_checks_of`)."""
        return window_start(now, DAY)

    async def before_check(
        self, tx: Tx, scope: Scope, to: str, *, failed_checks: int, now: datetime
    ) -> RateLimitError | None:
        """Wrong codes are capped per number across verifications, against guessing.

        `failed_checks`: the number's total since `failed_checks_since`, read with the
        verification; the buckets are read only to say when the cap lifts.
        """
        if self.allows_check(scope, failed_checks):
            return None
        buckets = await store.window(tx, scope, Kind.NUMBER, to, since=window_start(now, DAY))
        return self._failed_checks(buckets, scope, now)

    def allows_check(self, scope: Scope, failed_checks: int) -> bool:
        """Below the cap of wrong codes per number: `before_check` refuses nothing."""
        return failed_checks < self._failed_checks_cap(scope)

    def _verifications_cap(self, scope: Scope) -> int:
        return self.rules.per_number(
            self.rules.number_verifications_per_hour, livemode=scope.livemode
        )

    def _failed_checks_cap(self, scope: Scope) -> int:
        return self.rules.per_number(
            self.rules.number_failed_checks_per_day, livemode=scope.livemode
        )

    def _failed_checks(
        self, buckets: list[Bucket], scope: Scope, now: datetime
    ) -> RateLimitError | None:
        counts = [(b.start, b.failed_checks) for b in buckets]
        wait = wait_for_buckets(counts, cap=self._failed_checks_cap(scope), length=DAY, now=now)
        return None if wait is None else TooManyFailedChecks(retry_after=wait)

    async def record_check(
        self,
        tx: Tx,
        scope: Scope,
        *,
        number: str,
        e164: str,
        country: str,
        correct: bool,
        now: datetime,
    ) -> None:
        """Wrong codes count against the number (`number`: a destination's `key`);
        approvals are the conversions the pumping guard compares sends with (`e164` and
        `country`: the destination's)."""
        if not correct:
            await store.add_failed_check(tx, scope, number, at=now)
            return
        rows = [(kind, subject, 0, 1, 0) for kind, subject in _subjects_of(e164, country)]
        if rows:
            await store.bump_many(tx, scope, rows, at=now)

    async def prune(self, tx: Tx, *, now: datetime) -> int:
        pruned = await store.prune(tx, counters_before=window_start(now, DAY) - BUCKET, now=now)
        # A bucket before the one just past is written by no send any more.
        hourly = step_of(Kind.ACCOUNT)
        await store.fold_shards(
            tx, closed=bucket_of(now) - BUCKET, account_closed=bucket_of(now, hourly) - hourly
        )
        return pruned

    def _too_many_verifications(
        self, seen: store.SendContext, scope: Scope, now: datetime
    ) -> RateLimitError | None:
        opened = [verification.created_at for verification in seen.verifications]
        cap = self._verifications_cap(scope)
        wait = wait_for_times(opened, cap=cap, length=HOUR, now=now)
        return None if wait is None else TooManyVerifications(retry_after=wait)

    async def _pumping(
        self,
        tx: Tx,
        scope: Scope,
        destination: Destination,
        seen: store.SendContext,
        now: datetime,
    ) -> RateLimitError | None:
        for kind, subject, blocked_until in self._flags(destination, seen, now):
            if blocked_until is not None:
                return DestinationBlocked(retry_after=seconds_until(blocked_until, now))
            # Said once the unit commits: one that rolls back (a retry its key answers)
            # blocked nothing.
            mode = self.rules.guard
            tx.after_commit(functools.partial(_log_block, scope, kind, subject, destination, mode))
            if self.rules.guard is GuardMode.ENFORCE:
                until = now + self.rules.block_for
                await store.block(tx, scope, kind, subject, until=until, now=now)
                return DestinationBlocked(retry_after=seconds_until(until, now))
        return None

    def _flags(
        self, destination: Destination, seen: store.SendContext, now: datetime
    ) -> Iterator[tuple[Kind, str, datetime | None]]:
        """The destination's prefix and country that the guard flags, in order: blocked
        (with the block's end) or spiking (None); nothing while the guard is off."""
        if self.rules.guard is GuardMode.OFF:
            return
        for kind, subject in self._subjects(destination):
            until = seen.blocked.get((kind, subject))
            if until is not None and until > now:
                yield kind, subject, until
            elif self._spiking(kind, seen.counters[(kind, subject)]):
                yield kind, subject, None

    def _spiking(self, kind: Kind, totals: Totals) -> bool:
        min_sends = (
            self.rules.prefix_min_sends if kind is Kind.PREFIX else self.rules.country_min_sends
        )
        return looks_like_pumping(
            totals.sends,
            totals.approvals,
            min_sends=min_sends,
            min_conversion=self.rules.min_conversion,
        )

    async def _daily_cap(
        self, tx: Tx, scope: Scope, sends: int, now: datetime
    ) -> RateLimitError | None:
        """Stops the bleeding when the pumping guard misses: SMS cost money per segment."""
        if sends < self.rules.daily_sms_cap:
            return None
        since = window_start(now, DAY, step_of(Kind.ACCOUNT))
        buckets = await store.window(tx, scope, Kind.ACCOUNT, "", since=since)
        counts = [(b.start, b.sends) for b in buckets]
        wait = wait_for_buckets(counts, cap=self.rules.daily_sms_cap, length=DAY, now=now)
        return None if wait is None else DailyCapReached(retry_after=wait)

    @staticmethod
    def _subjects(destination: Destination) -> tuple[tuple[Kind, str], ...]:
        """The prefix and country the pumping guard counts; none for an email address
        (no termination fee to pump, no country to route or bill by)."""
        return _subjects_of(destination.e164, destination.country)


def _subjects_of(e164: str, country: str) -> tuple[tuple[Kind, str], ...]:
    if not country:
        return ()
    return ((Kind.PREFIX, prefix_of(e164)), (Kind.COUNTRY, country))


# Windows and blocks read for a destination without a prefix or country: "" is a
# subject no send of those kinds writes.
_NO_SUBJECTS: tuple[tuple[Kind, str], ...] = ((Kind.PREFIX, ""), (Kind.COUNTRY, ""))


def _log_block(
    scope: Scope, kind: Kind, subject: str, destination: Destination, mode: GuardMode
) -> None:
    shown = redacted_prefix(subject) if kind is Kind.PREFIX else subject
    log.warning(
        "pumping.blocked",
        extra={
            "account_id": scope.account_id,
            "livemode": scope.livemode,
            "kind": kind.value,
            "subject": shown,
            "country": destination.country,
            "guard": mode.value,
        },
    )
