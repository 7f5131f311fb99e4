"""The delivery layer: submit attempts, record receipts, fail over, count usage.

An attempt is written `queued`, with a lease, in the transaction that creates
its verification or message. The process that created it submits it at once
when it runs carriers (`dispatch`); otherwise, or if that process dies, a
dispatch loop (`DeliveryLoop`, in `relay serve` or `relay worker`) claims it
when the lease has passed. Every answer is recorded in one transaction with
the events it causes and, when it is a failure, with the next attempt on the
next carrier of the route (failover). A submit that was made but whose answer
was never recorded (a crash in between) is submitted again after the lease:
at least once, never silently dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from relay.abuse.models import country_allowed
from relay.accounts.models import Caller
from relay.carriers import routing
from relay.carriers.base import (
    AnswersAtOnce,
    CarrierError,
    DeliveryReport,
    OutboundSms,
    SubmitReceipt,
)
from relay.carriers.registry import CarrierSet
from relay.clock import Clock
from relay.crypto import Keyring
from relay.db.engine import Database
from relay.delivery import early_reports, store, subjects, usage
from relay.delivery.attempts import AttemptStatus
from relay.delivery.store import AttemptRow
from relay.delivery.subjects import Subject
from relay.errors import CountryNotAllowed, NoRouteAvailable
from relay.events import store as event_store
from relay.events.models import EventType, NewEvent
from relay.ids import new_id
from relay.messages import store as message_store
from relay.messages.models import Message, MessageStatus
from relay.phone import Destination, parse_destination
from relay.sms.text import render_sms
from relay.verifications.models import Verification

log = logging.getLogger("relay.delivery")

_EVENTS: dict[tuple[str, AttemptStatus], EventType] = {
    ("verification", AttemptStatus.SENT): EventType.VERIFICATION_SENT,
    ("verification", AttemptStatus.DELIVERED): EventType.VERIFICATION_DELIVERED,
    ("verification", AttemptStatus.FAILED): EventType.VERIFICATION_FAILED,
    ("message", AttemptStatus.SENT): EventType.MESSAGE_SENT,
    ("message", AttemptStatus.DELIVERED): EventType.MESSAGE_DELIVERED,
    ("message", AttemptStatus.FAILED): EventType.MESSAGE_FAILED,
}

EARLY_REPORT_RETENTION = timedelta(days=1)


@dataclass(frozen=True)
class Job:
    """An attempt this process holds the lease for, with the SMS to submit."""

    attempt: AttemptRow
    sms: OutboundSms
    expires_at: datetime


@dataclass(frozen=True)
class Queued:
    """The first attempt of a send, as the creating transaction wrote it."""

    attempt_id: str
    route: tuple[str, ...]


def _following(previous: Job, attempt: AttemptRow) -> Job:
    """The failover attempt's job: the same SMS, under the new attempt's id."""
    sms = dataclasses.replace(previous.sms, attempt_id=attempt.id)
    return Job(attempt, sms, previous.expires_at)


class Delivery:
    def __init__(
        self,
        db: Database,
        keyring: Keyring,
        clock: Clock,
        carriers: CarrierSet,
        *,
        receipt_timeout: float,
        lease: float,
        docs: str = "",
    ) -> None:
        self._db = db
        self._keyring = keyring
        self._clock = clock
        self.carriers = carriers
        self._receipt_timeout = receipt_timeout
        self._lease = timedelta(seconds=lease)
        self._docs = docs
        self.owner = f"dispatch-{secrets.token_hex(6)}"
        # True once `start` has started the carriers: this process submits SMS.
        self.dispatching = False
        self.wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        # Submits accepted but not yet recorded, by (carrier, carrier message id).
        # A receipt for one of them waits for the record instead of racing it:
        # carriers hand the id over and return without yielding to the loop
        # (the SMPP carrier holds early receipts until then), so the entry is
        # always made before that receipt's handler runs.
        self._recording: dict[tuple[str, str], asyncio.Event] = {}

    # --- lifecycle ----------------------------------------------------------

    async def start(self, *, dispatch: bool) -> None:
        """Start the carriers. Without `dispatch`, only those that hold no connection.

        An API process that leaves sending to `relay worker` still takes
        provider callbacks; it must not also open SMPP binds of its own.
        """
        for name, carrier in self.carriers.carriers.items():
            if dispatch or name not in self.carriers.connected:
                await carrier.start(self.on_report)
        self.dispatching = dispatch

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for carrier in self.carriers.carriers.values():
            await carrier.close()

    # --- the creating transaction -------------------------------------------

    def destination(self, caller: Caller, to: str) -> tuple[Destination, tuple[str, ...]]:
        """Where a send may go and through which carriers, refused before anything is written.

        Country permissions and the route are checked before any row, carrier
        call or cost; a live send with no route writes nothing.
        """
        destination = parse_destination(to, livemode=caller.livemode)
        if not country_allowed(destination.country, caller.allowed_countries):
            raise CountryNotAllowed(param="to")
        route = self.carriers.routes.for_send(livemode=caller.livemode, country=destination.country)
        if route is None:
            raise NoRouteAvailable()
        return destination, route

    def queue_first(
        self,
        conn: Connection,
        route: tuple[str, ...],
        *,
        now: datetime,
        verification_id: str | None = None,
        message_id: str | None = None,
    ) -> Queued:
        """Write the first attempt of a send; this process leases it if it will submit it."""
        attempt_id = new_id("att")
        store.insert_queued(
            conn,
            attempt_id=attempt_id,
            carrier=route[0],
            route=route,
            position=0,
            now=now,
            **self._lease_for_new(now),
            verification_id=verification_id,
            message_id=message_id,
        )
        return Queued(attempt_id, route)

    def _lease_for_new(self, now: datetime) -> dict[str, Any]:
        """A new attempt is leased to this process when it will submit it; else free at once."""
        if self.dispatching:
            return {"lease_owner": self.owner, "lease_until": now + self._lease}
        return {"lease_owner": None, "lease_until": now}

    def job(
        self,
        queued: Queued,
        *,
        owner_id: str,
        to: str,
        sender: str,
        body: str,
        expires_at: datetime,
        message: bool = False,
    ) -> Job:
        attempt = AttemptRow(
            id=queued.attempt_id,
            verification_id=None if message else owner_id,
            message_id=owner_id if message else None,
            carrier=queued.route[0],
            status=AttemptStatus.QUEUED,
            route=queued.route,
            position=0,
            carrier_message_id=None,
        )
        sms = OutboundSms(attempt_id=queued.attempt_id, to=to, sender=sender, body=body)
        return Job(attempt, sms, expires_at)

    def submit_in_transaction(
        self, conn: Connection, job: Job, *, now: datetime
    ) -> tuple[Job | None, Verification | Message | None]:
        """Submit through carriers that answer without I/O, inside the creating transaction.

        Failover goes on here while the next carrier also answers at once.
        Returns the job this process still submits over the network (None:
        nothing left here), and the verification or message as this
        transaction last loaded it, when it did. A process that does not
        dispatch submits nothing: a dispatch loop (`relay worker`) claims the
        attempt.
        """
        if not self.dispatching:
            return None, None
        conn.info.pop(subjects.LATEST, None)
        following: Job | None = job
        while following is not None:
            current = following
            carrier = self.carriers.carriers.get(current.attempt.carrier)
            if not isinstance(carrier, AnswersAtOnce):
                return current, None
            attempt = current.attempt
            try:
                receipt = carrier.submit_now(current.sms)
            except CarrierError as error:
                decision = self._after_submit_error(error, current, now)
                if isinstance(decision, routing.Wait):
                    store.postpone(conn, attempt.id, until=decision.until)
                    self.wake.set()
                    return None, None
                row = self._failed(conn, attempt, AttemptStatus.QUEUED, decision, now)
            else:
                row = self._sent(conn, attempt, receipt, now)
            following = None if row is None else _following(current, row)
        return None, conn.info.pop(subjects.LATEST, None)

    # --- submitting ---------------------------------------------------------

    async def dispatch(self, job: Job | None) -> Verification | Message | None:
        """Submit a leased attempt and record the answer; failover continues here.

        Returns the verification or message as the last transaction left it,
        when that transaction loaded it (None: read it again).
        """
        latest: Verification | Message | None = None
        while job is not None:
            job, latest = await self._submit_one(job)
        return latest

    def dispatch_soon(self, job: Job | None) -> None:
        if job is None:
            return
        task = asyncio.create_task(self._dispatch_logged(job), name=f"dispatch-{job.attempt.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch_logged(self, job: Job) -> None:
        try:
            await self.dispatch(job)
        except Exception:
            # The lease runs out and a dispatch loop tries the attempt again.
            log.exception("delivery.dispatch_failed attempt=%s", job.attempt.id)

    async def _submit_one(self, job: Job) -> tuple[Job | None, Verification | Message | None]:
        attempt = job.attempt
        carrier = self.carriers.carriers.get(attempt.carrier)
        if carrier is None:
            now = self._clock.now()
            failure = routing.after_failure(
                routing.CARRIER_NOT_CONFIGURED,
                attempt.route,
                attempt.position,
                now=now,
                expires_at=job.expires_at,
                docs=self._docs,
            )
            return await self._write_job(
                lambda c: self._failed(c, attempt, AttemptStatus.QUEUED, failure, now), job
            )
        try:
            receipt = await carrier.submit(job.sms)
        except CarrierError as error:
            now = self._clock.now()
            decision = self._after_submit_error(error, job, now)
            if isinstance(decision, routing.Wait):
                until = decision.until
                await self._db.write(lambda c: store.postpone(c, attempt.id, until=until))
                log.info("delivery.throttled carrier=%s attempt=%s", attempt.carrier, attempt.id)
                self.wake.set()
                return None, None
            log.info(
                "delivery.submit_failed carrier=%s attempt=%s code=%s",
                attempt.carrier,
                attempt.id,
                error.code,
            )
            return await self._write_job(
                lambda c: self._failed(c, attempt, AttemptStatus.QUEUED, decision, now), job
            )
        now = self._clock.now()
        key = (attempt.carrier, receipt.carrier_message_id)
        recorded = self._recording[key] = asyncio.Event()
        try:
            return await self._write_job(lambda c: self._sent(c, attempt, receipt, now), job)
        finally:
            # Only our own entry: an SMSC that reused a message id must not
            # release (or crash) another submit's wait.
            if self._recording.get(key) is recorded:
                del self._recording[key]
            recorded.set()

    def _after_submit_error(
        self, error: CarrierError, job: Job, now: datetime
    ) -> routing.Wait | routing.Fail:
        attempt = job.attempt
        return routing.after_submit_error(
            error,
            attempt.route,
            attempt.position,
            now=now,
            expires_at=job.expires_at,
            docs=self._docs,
        )

    async def _write_job(
        self, work: Callable[[Connection], AttemptRow | None], previous: Job
    ) -> tuple[Job | None, Verification | Message | None]:
        """Run a transaction that may open a failover attempt, and make that the next job."""

        def tracked(conn: Connection) -> tuple[AttemptRow | None, Verification | Message | None]:
            conn.info.pop(subjects.LATEST, None)
            following = work(conn)
            return following, conn.info.pop(subjects.LATEST, None)

        following, latest = await self._db.write(tracked)
        if following is None:
            return None, latest
        return _following(previous, following), None

    # --- transactions -------------------------------------------------------

    def _sent(
        self, conn: Connection, attempt: AttemptRow, receipt: SubmitReceipt, now: datetime
    ) -> AttemptRow | None:
        message_id = receipt.carrier_message_id
        sent = dataclasses.replace(
            attempt, status=AttemptStatus.SENT, carrier_message_id=message_id
        )
        if receipt.final is not None and receipt.final.status == "delivered":
            # The carrier answered delivered at once (the sandbox): one UPDATE from
            # queued, one load for both events.
            if not store.record_delivered(conn, attempt.id, carrier_message_id=message_id, now=now):
                log.warning("delivery.lease_lost attempt=%s", attempt.id)
                return None
            self._delivered(conn, sent, now, sent_event=True)
            return None
        due = now + timedelta(
            seconds=self.carriers.receipt_timeout(attempt.carrier, self._receipt_timeout)
        )
        if not store.record_sent(
            conn, attempt.id, carrier_message_id=message_id, report_due_at=due, now=now
        ):
            log.warning("delivery.lease_lost attempt=%s", attempt.id)
            return None
        if attempt.message_id is not None:
            message_store.mark_sent(conn, attempt.message_id, now=now)
        report = receipt.final or early_reports.take(conn, attempt.carrier, message_id)
        if report is not None and report.status == "delivered":
            # A receipt that came before its submit's record: one load serves both events.
            return self._apply(conn, sent, report, now, sent_event=True)
        subject = subjects.load(conn, attempt, now=now)
        if subject is not None:
            self._emit(conn, subject, AttemptStatus.SENT, now)
        if report is None:
            return None
        return self._apply(conn, sent, report, now)

    def _apply(
        self,
        conn: Connection,
        attempt: AttemptRow,
        report: DeliveryReport,
        now: datetime,
        *,
        sent_event: bool = False,
    ) -> AttemptRow | None:
        """A final receipt for a sent attempt: delivered, or failed and failed over.

        `sent_event`: also emit the attempt's `*.sent`, as of just before delivery.
        """
        if report.status == "delivered":
            if not store.finish(
                conn,
                attempt.id,
                from_status=AttemptStatus.SENT,
                to_status=AttemptStatus.DELIVERED,
                error=None,
                now=now,
            ):
                return None
            self._delivered(conn, attempt, now, sent_event=sent_event)
            return None
        failure = routing.after_failure(
            routing.SMS_UNDELIVERABLE,
            attempt.route,
            attempt.position,
            now=now,
            expires_at=self._expires_at(conn, attempt, now),
            carrier_code=report.error_code,
            docs=self._docs,
        )
        return self._failed(conn, attempt, AttemptStatus.SENT, failure, now)

    def _delivered(
        self, conn: Connection, attempt: AttemptRow, now: datetime, *, sent_event: bool
    ) -> None:
        """After the attempt's row says delivered: its message, usage and events."""
        if attempt.message_id is not None:
            # From queued or sent: the message's own state follows in one step.
            message_store.finish(conn, attempt.message_id, MessageStatus.DELIVERED, now=now)
        subject = subjects.load(conn, attempt, now=now)
        if subject is None:
            return
        if sent_event:
            self._emit(conn, subjects.just_sent(subject, attempt.id), AttemptStatus.SENT, now)
        self._count(conn, subject, attempt, "delivered", now)
        self._emit(conn, subject, AttemptStatus.DELIVERED, now)

    def _failed(
        self,
        conn: Connection,
        attempt: AttemptRow,
        from_status: AttemptStatus,
        failure: routing.Fail,
        now: datetime,
    ) -> AttemptRow | None:
        """Record a failed attempt, then open the next one if failover may go on."""
        if not store.finish(
            conn,
            attempt.id,
            from_status=from_status,
            to_status=AttemptStatus.FAILED,
            error=failure.error,
            now=now,
        ):
            return None
        before = subjects.load(conn, attempt, now=now)
        position = failure.next_position
        if before is None or not before.is_open:
            position = None
        if position is None and attempt.message_id is not None:
            message_store.finish(conn, attempt.message_id, MessageStatus.FAILED, now=now)
        subject = subjects.load(conn, attempt, now=now) if attempt.message_id else before
        if subject is None:
            return None
        self._count(conn, subject, attempt, str(failure.error["code"]), now)
        self._emit(conn, subject, AttemptStatus.FAILED, now)
        if position is None:
            return None
        following = AttemptRow(
            id=new_id("att"),
            verification_id=attempt.verification_id,
            message_id=attempt.message_id,
            carrier=attempt.route[position],
            status=AttemptStatus.QUEUED,
            route=attempt.route,
            position=position,
            carrier_message_id=None,
        )
        store.insert_queued(
            conn,
            attempt_id=following.id,
            carrier=following.carrier,
            route=following.route,
            position=position,
            now=now,
            **self._lease_for_new(now),
            verification_id=following.verification_id,
            message_id=following.message_id,
        )
        return following

    def _expires_at(self, conn: Connection, attempt: AttemptRow, now: datetime) -> datetime:
        subject = subjects.load(conn, attempt, now=now)
        return now if subject is None else subject.expires_at

    def _count(
        self, conn: Connection, subject: Subject, attempt: AttemptRow, outcome: str, now: datetime
    ) -> None:
        if not subject.livemode:
            return  # test keys never cost anything
        usage.count(
            conn,
            account_id=subject.account_id,
            day=now.date().isoformat(),
            country=subject.country,
            carrier=attempt.carrier,
            outcome=outcome,
        )

    def _emit(
        self, conn: Connection, subject: Subject, status: AttemptStatus, now: datetime
    ) -> None:
        event = NewEvent(
            id=new_id("evt"),
            type=_EVENTS[(subject.kind, status)],
            created_at=now,
            livemode=subject.livemode,
            data_object=subject.payload,
        )
        event_store.record(
            conn,
            event,
            account_id=subject.account_id,
            related_id=subject.id,
            webhook_url=subject.webhook_url,
        )

    # --- receipts -----------------------------------------------------------

    async def on_report(self, report: DeliveryReport) -> None:
        """The sink every carrier reports to. Raises if it could not be recorded."""
        recording = self._recording.get((report.carrier, report.carrier_message_id))
        if recording is not None:
            await recording.wait()
        now = self._clock.now()
        following = await self._db.write(lambda c: self._report(c, report, now))
        if following is not None:
            await self._follow([following])

    def _report(self, conn: Connection, report: DeliveryReport, now: datetime) -> AttemptRow | None:
        attempt = store.by_carrier_message(conn, report.carrier, report.carrier_message_id)
        if attempt is None:
            # The receipt overtook the recording of its submit: keep it for that.
            early_reports.park(conn, report, now=now)
            return None
        if attempt.status is not AttemptStatus.SENT:
            log.info(
                "delivery.report_ignored carrier=%s attempt=%s status=%s",
                report.carrier,
                attempt.id,
                attempt.status.value,
            )
            return None
        return self._apply(conn, attempt, report, now)

    # --- the loop's work ----------------------------------------------------

    async def work_waiting(self) -> tuple[bool, bool, bool]:
        now = self._clock.now()
        return await self._db.read(lambda c: store.work_waiting(c, now=now))

    async def claim(self, *, limit: int, busy: list[str]) -> list[Job]:
        """Lease queued attempts nobody is submitting, and build their SMS."""
        now = self._clock.now()
        until = now + self._lease
        ids = await self._db.write(
            lambda c: store.claim_queued(
                c, now=now, owner=self.owner, lease_until=until, limit=limit, busy=busy
            )
        )
        if not ids:
            return []

        def build(conn: Connection) -> list[Job]:
            built = (self._job_or_cancel(conn, attempt_id, now) for attempt_id in ids)
            return [job for job in built if job is not None]

        return await self._db.write(build)

    def _job_or_cancel(self, conn: Connection, attempt_id: str, now: datetime) -> Job | None:
        attempt = store.load(conn, attempt_id)
        if attempt is None:
            return None
        job = self._job(conn, attempt)
        if job is None or now >= job.expires_at:
            # Closed or expired while queued: sending now would only cost money.
            store.finish(
                conn,
                attempt.id,
                from_status=AttemptStatus.QUEUED,
                to_status=AttemptStatus.FAILED,
                error=routing.attempt_error(routing.SEND_CANCELED, docs=self._docs),
                now=now,
            )
            if attempt.message_id is not None:
                message_store.finish(conn, attempt.message_id, MessageStatus.FAILED, now=now)
            return None
        return job

    def _job(self, conn: Connection, attempt: AttemptRow) -> Job | None:
        found = subjects.sendable(conn, attempt)
        if found is None or found.sealed_code is None:
            return None
        code = self._keyring.unseal(found.owner_id, found.sealed_code)
        body = render_sms(
            locale=found.locale, brand=found.brand, code=code, webotp_domain=found.webotp_domain
        )
        sms = OutboundSms(attempt_id=attempt.id, to=found.to, sender=found.sender, body=body)
        return Job(attempt, sms, found.expires_at)

    async def time_out_reports(self, *, limit: int = 100) -> int:
        """Fail over every sent attempt whose receipt deadline has passed."""
        now = self._clock.now()

        def work(conn: Connection) -> list[AttemptRow]:
            following = []
            for attempt in store.overdue_reports(conn, now=now, limit=limit):
                failure = routing.after_failure(
                    routing.REPORT_TIMEOUT,
                    attempt.route,
                    attempt.position,
                    now=now,
                    expires_at=self._expires_at(conn, attempt, now),
                    docs=self._docs,
                )
                opened = self._failed(conn, attempt, AttemptStatus.SENT, failure, now)
                if opened is not None:
                    following.append(opened)
            return following

        opened = await self._db.write(work)
        await self._follow(opened)
        return len(opened)

    async def apply_early_reports(self, *, limit: int = 100) -> int:
        """Receipts parked while another process was still recording their submit.

        Returns how many failover attempts they opened.
        """
        now = self._clock.now()

        def work(conn: Connection) -> list[AttemptRow]:
            following = []
            for report in early_reports.matched(conn, limit=limit):
                opened = self._report(conn, report, now)
                if opened is not None:
                    following.append(opened)
            return following

        opened = await self._db.write(work)
        await self._follow(opened)
        return len(opened)

    async def prune(self) -> int:
        """Parked receipts that matched nothing for a day are for SMS this database never sent."""
        before = self._clock.now() - EARLY_REPORT_RETENTION
        return await self._db.write(lambda c: early_reports.prune(c, before=before))

    async def _follow(self, opened: list[AttemptRow]) -> None:
        """Submit failover attempts opened outside a dispatch, here if this process sends."""
        if not self.dispatching:
            return
        if not opened:
            return

        def build(conn: Connection) -> list[Job | None]:
            return [self._job(conn, attempt) for attempt in opened]

        for job in await self._db.read(build):
            self.dispatch_soon(job)
