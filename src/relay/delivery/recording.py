"""Recording carriers' answers: one unit of work each, with its owner's change and usage.

Every answer moves the attempt by one conditional UPDATE, tells the owner
(which updates itself and records its events), counts a live attempt's
outcome, and, when it is a failure, opens the next attempt on the next
carrier of the route (failover). All of it commits together or not at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from relay.carriers import routing
from relay.carriers.base import Channel, DeliveryReport, SubmitReceipt
from relay.carriers.registry import CarrierSet
from relay.db.sql import Tx
from relay.delivery import early_reports, erased_receipts, store, usage
from relay.delivery.attempts import AttemptStatus
from relay.delivery.jobs import Job, Step
from relay.delivery.owners import Kind, Owner, OwnerRef, OwnerState
from relay.delivery.store import AttemptRow, NewAttempt
from relay.metrics import observe

log = logging.getLogger("relay.delivery")


class Recorder:
    def __init__(
        self,
        owners: Mapping[Kind, Owner],
        carriers: CarrierSet,
        *,
        receipt_timeout: float,
        lease: timedelta,
        docs: str,
    ) -> None:
        self._owners = owners
        self._carriers = carriers
        self._receipt_timeout = receipt_timeout
        self._lease = lease
        self.docs = docs
        # The lease owner of attempts this process opens, when it submits them itself.
        self.leased_to: str | None = None

    def _owner(self, attempt: AttemptRow) -> tuple[Owner, str]:
        ref = attempt.owner
        return self._owners[ref.kind], ref.id

    # --- opening attempts -----------------------------------------------------

    async def queue(
        self,
        tx: Tx,
        owner: OwnerRef,
        route: tuple[str, ...],
        position: int,
        now: datetime,
        channels: tuple[Channel, ...] | None = None,
    ) -> AttemptRow:
        """Write a queued attempt; this process leases it if it will submit it, else none does."""
        attempt = store.queued(owner, route, position, channels)
        until = now if self.leased_to is None else now + self._lease
        await store.insert_queued(
            tx, attempt, now=now, lease_owner=self.leased_to, lease_until=until
        )
        return attempt

    async def job(self, tx: Tx, attempt: AttemptRow, now: datetime) -> Job | None:
        """The attempt's SMS, rebuilt by its owner; None once the owner is closed."""
        owner, owner_id = self._owner(attempt)
        draft = await owner.draft(tx, owner_id, now=now)
        return None if draft is None else Job.of(attempt, draft)

    async def job_or_cancel(self, tx: Tx, attempt_id: str, now: datetime) -> Job | None:
        attempt = await store.load(tx, attempt_id)
        if attempt is None:
            return None
        job = await self.job(tx, attempt, now)
        if job is not None and now < job.expires_at:
            return job
        # Closed or expired while queued: sending now would only cost money.
        error = routing.attempt_error(routing.SEND_CANCELED, docs=self.docs)
        await store.finish(
            tx,
            attempt.id,
            from_status=AttemptStatus.QUEUED,
            to_status=AttemptStatus.FAILED,
            error=error,
            now=now,
        )
        owner, owner_id = self._owner(attempt)
        await owner.attempt_canceled(tx, owner_id, now=now)
        return None

    # --- answers --------------------------------------------------------------

    async def sent(
        self, tx: Tx, attempt: AttemptRow, receipt: SubmitReceipt, now: datetime, *, segments: int
    ) -> Step:
        """A carrier took the attempt, billing it `segments`; its answer may already be final."""
        message_id = receipt.carrier_message_id
        if receipt.final is not None:
            observe.sms_receipt(tx, carrier=attempt.carrier, attempt_id=attempt.id)
        if receipt.final is not None and receipt.final.status == "delivered":
            # Sent and delivered in one UPDATE from queued, one owner load for both events.
            if not await store.record_delivered(
                tx, attempt.id, carrier_message_id=message_id, segments=segments, now=now
            ):
                log.warning("delivery.lease_lost attempt=%s", attempt.id)
                return Step()
            return await self._delivered(tx, attempt, now, also_sent=True)
        due = now + timedelta(
            seconds=self._carriers.receipt_timeout(attempt.carrier, self._receipt_timeout)
        )
        if not await store.record_sent(
            tx,
            attempt.id,
            carrier_message_id=message_id,
            segments=segments,
            report_due_at=due,
            now=now,
        ):
            log.warning("delivery.lease_lost attempt=%s", attempt.id)
            return Step()
        report = receipt.final or await early_reports.take(tx, attempt.carrier, message_id)
        if report is not None and report.status == "delivered":
            # A receipt that came before its submit's record: one owner load for both events.
            return await self._finish_delivered(tx, attempt, now, also_sent=True)
        owner, owner_id = self._owner(attempt)
        state = await owner.attempt_sent(tx, owner_id, now=now)
        if report is None:
            return Step(latest=_snapshot(state))
        expires_at = now if state is None else state.expires_at
        return await self._undeliverable(tx, attempt, report, now, expires_at)

    async def report(self, tx: Tx, report: DeliveryReport, now: datetime) -> Step:
        """A carrier's final receipt, for whichever attempt carries its message id."""
        attempt = await store.by_carrier_message(tx, report.carrier, report.carrier_message_id)
        if attempt is None:
            if await erased_receipts.erased(tx, report.carrier, report.carrier_message_id, now=now):
                log.info("delivery.report_dropped carrier=%s reason=erased", report.carrier)
                return Step()
            # The receipt overtook the recording of its submit: keep it for that.
            await early_reports.park(tx, report, now=now)
            return Step()
        if attempt.status is not AttemptStatus.SENT:
            log.info(
                "delivery.report_ignored carrier=%s attempt=%s status=%s",
                report.carrier,
                attempt.id,
                attempt.status.value,
            )
            return Step()
        observe.sms_receipt(tx, carrier=attempt.carrier, attempt_id=attempt.id)
        if report.status == "delivered":
            return await self._finish_delivered(tx, attempt, now, also_sent=False)
        expires_at = await self.expires_at(tx, attempt, now)
        return await self._undeliverable(tx, attempt, report, now, expires_at)

    async def failed(
        self,
        tx: Tx,
        attempt: AttemptRow,
        from_status: AttemptStatus,
        failure: routing.Fail,
        now: datetime,
    ) -> Step:
        """Record a failed attempt, then open the next one if failover may go on."""
        if not await store.finish(
            tx,
            attempt.id,
            from_status=from_status,
            to_status=AttemptStatus.FAILED,
            error=failure.error,
            now=now,
        ):
            return Step()
        owner, owner_id = self._owner(attempt)
        position = failure.next_position
        state = await owner.attempt_failed(tx, owner_id, now=now, last=position is None)
        if state is None:
            return Step()
        await self._count(tx, state, attempt, str(failure.error["code"]), now)
        if position is None or not state.is_open:
            return Step(latest=state.snapshot)
        following = await self.queue(
            tx, attempt.owner, attempt.route, position, now, attempt.channels
        )
        return Step(following, state.snapshot)

    async def expires_at(self, tx: Tx, attempt: AttemptRow, now: datetime) -> datetime:
        """Until when failover may go on: the owner's expiry (now, if it is gone)."""
        owner, owner_id = self._owner(attempt)
        state = await owner.state(tx, owner_id, now=now)
        return now if state is None else state.expires_at

    async def _undeliverable(
        self,
        tx: Tx,
        attempt: AttemptRow,
        report: DeliveryReport,
        now: datetime,
        expires_at: datetime,
    ) -> Step:
        failure = routing.after_failure(
            routing.SMS_UNDELIVERABLE,
            attempt.route,
            attempt.position,
            now=now,
            expires_at=expires_at,
            carrier_code=report.error_code,
            docs=self.docs,
        )
        return await self.failed(tx, attempt, AttemptStatus.SENT, failure, now)

    async def _finish_delivered(
        self, tx: Tx, attempt: AttemptRow, now: datetime, *, also_sent: bool
    ) -> Step:
        if not await store.finish(
            tx,
            attempt.id,
            from_status=AttemptStatus.SENT,
            to_status=AttemptStatus.DELIVERED,
            error=None,
            now=now,
        ):
            return Step()
        return await self._delivered(tx, attempt, now, also_sent=also_sent)

    async def _delivered(
        self, tx: Tx, attempt: AttemptRow, now: datetime, *, also_sent: bool
    ) -> Step:
        """After the attempt's row says delivered: its owner and usage."""
        owner, owner_id = self._owner(attempt)
        state = await owner.attempt_delivered(
            tx, owner_id, attempt.id, now=now, also_sent=also_sent
        )
        if state is None:
            return Step()
        await self._count(tx, state, attempt, "delivered", now)
        return Step(latest=state.snapshot)

    async def count_answers(
        self, tx: Tx, state: OwnerState, attempts: Sequence[NewAttempt], now: datetime
    ) -> None:
        """Usage of the attempts a send wrote already answered (delivered or failed)."""
        for new in attempts:
            row = new.row
            answered = row.status is AttemptStatus.FAILED and row.carrier_message_id is not None
            if row.status is AttemptStatus.DELIVERED or answered:
                # A final receipt came with the submit.
                observe.sms_receipt(tx, carrier=row.carrier, attempt_id=row.id)
            if row.status is AttemptStatus.DELIVERED:
                await self._count(tx, state, row, "delivered", now)
            elif new.error is not None:
                await self._count(tx, state, row, str(new.error["code"]), now)

    async def _count(
        self, tx: Tx, state: OwnerState, attempt: AttemptRow, outcome: str, now: datetime
    ) -> None:
        observe.sms_attempt(
            tx,
            carrier=attempt.carrier,
            country=state.country,
            outcome=outcome,
            channel=attempt.channel,
        )
        if not state.livemode:
            return  # test keys never cost anything
        await usage.count(
            tx,
            attempt_id=attempt.id,
            account_id=state.account_id,
            day=now.date().isoformat(),
            country=state.country,
            carrier=attempt.carrier,
            outcome=outcome,
        )


def _snapshot(state: OwnerState | None) -> object | None:
    return None if state is None else state.snapshot
