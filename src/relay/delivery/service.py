"""The delivery layer: submit attempts, record receipts, fail over, count usage.

An attempt is written `queued`, with a lease, in the transaction that creates
its verification or message (`decide`, then `write`: the one send path both
share), unless a carrier answered it there without I/O. The process that
created it submits it at once when it runs carriers; otherwise,
or if that process dies, a dispatch loop (`relay.delivery.loop`, in `relay
serve` or `relay worker`) claims it when the lease has passed. Every answer is
recorded in one transaction (`relay.delivery.recording`) with its owner's
change and, when it is a failure, with the next attempt on the next carrier
of the route (failover). A submit that was made but whose answer was never
recorded (a crash in between) is submitted again after the lease: at least
once, never silently dropped.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta

from relay.carriers import routing
from relay.carriers.base import CarrierError, Channel, DeliveryReport
from relay.carriers.registry import CarrierSet
from relay.clock import Clock
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.delivery import at_once, early_reports, erased_receipts, leases, store
from relay.delivery.attempts import AttemptStatus
from relay.delivery.figures import MeasuredRoutes, RecentFigures
from relay.delivery.jobs import Job, Sending, Step, Submitted, Then
from relay.delivery.owners import Draft, Kind, Owner, OwnerRef
from relay.delivery.recording import Recorder
from relay.delivery.store import AttemptRow
from relay.events import store as event_store
from relay.records import changed

log = logging.getLogger("relay.delivery")

EARLY_REPORT_RETENTION = timedelta(days=1)


class Delivery:
    def __init__(
        self,
        db: Db,
        clock: Clock,
        carriers: CarrierSet,
        owners: Mapping[Kind, Owner],
        *,
        receipt_timeout: float,
        lease: float,
        max_segments: int = 3,
        docs: str = "",
        draw: Callable[[], float] = random.random,
    ) -> None:
        self._db = db
        self._clock = clock
        self.carriers = carriers
        self._lease = timedelta(seconds=lease)
        self._owners = owners
        self._record = Recorder(
            owners, carriers, receipt_timeout=receipt_timeout, lease=self._lease, docs=docs
        )
        self.owner = f"dispatch-{secrets.token_hex(6)}"
        self._leases = at_once.Leases(self.owner, self._lease, receipt_timeout, docs, max_segments)
        self.wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        # Submits accepted but not yet recorded, by (carrier, carrier message id).
        # A receipt for one of them waits for the record instead of racing it:
        # carriers hand the id over and return without yielding to the loop
        # (the SMPP carrier holds early receipts until then), so the entry is
        # always made before that receipt's handler runs.
        self._recording: dict[tuple[str, str], asyncio.Event] = {}
        self.measured = MeasuredRoutes(RecentFigures(db, clock), carriers, draw)

    @property
    def dispatching(self) -> bool:
        """True once `start` has started the carriers: this process submits SMS."""
        return self._record.leased_to is not None

    # --- lifecycle ----------------------------------------------------------

    async def start(self, *, dispatch: bool) -> None:
        """Start the carriers. Without `dispatch`, only those that hold no connection.

        An API process that leaves sending to `relay worker` still takes
        provider callbacks; it must not also open SMPP binds of its own.
        """
        for name, carrier in self.carriers.carriers.items():
            if dispatch or name not in self.carriers.connected:
                await carrier.start(self.on_report)
        self._record.leased_to = self.owner if dispatch else None

    async def drain(self, *, grace: float) -> None:
        """At shutdown: let the submits this process started finish within `grace`
        seconds, cancel the rest, and give back every attempt it still holds."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        await self._cancel_tasks()
        if not self.dispatching:
            return
        now = self._clock.now()
        owner = self.owner
        try:
            released = await self._db.write(lambda tx: leases.release(tx, owner=owner, now=now))
        except Exception:
            # Not given back: their leases run out and a dispatch loop takes them then.
            log.exception("delivery.release_failed")
            return
        log.info("delivery.released", extra={"attempts": released})

    async def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        await self._cancel_tasks()
        for carrier in self.carriers.carriers.values():
            await carrier.close()

    # --- the one send path --------------------------------------------------

    def decide(
        self,
        tx: Tx,
        owner: OwnerRef,
        draft: Draft,
        route: tuple[str, ...],
        *,
        opened: object,
        livemode: bool,
        now: datetime,
        channels: tuple[Channel, ...] | None = None,
    ) -> Sending:
        """Inside the owner's creating unit, before it writes: open its first attempt,
        submitted here through carriers that answer without I/O (what they do with it
        waits for the commit), failing over while the next one does too. `opened`: the
        owner as this unit makes it. Returns what `write` writes and the owner as it will
        stand. A process that does not dispatch submits nothing: a dispatch loop (`relay
        worker`) claims the attempt. `channels`: each carrier's (None: SMS)."""
        first = store.queued(owner, route, 0, channels)
        if not self.dispatching:
            planned = at_once.Plan([store.NewAttempt(first, lease_until=now)])
        else:
            job = Job.of(first, draft)
            planned = at_once.plan(
                self.carriers, job, self._leases, now=now, after_commit=tx.after_commit
            )
        views = [new.view(at=now, livemode=livemode) for new in planned.attempts]
        told = self._owners[owner.kind].told(opened, views, planned.answers, now=now)
        return Sending(planned, told)

    async def write(self, tx: Tx, sending: Sending, *, now: datetime) -> Submitted:
        """The send `decide` made, after its owner's row: every attempt in one statement,
        the owner's events in one, usage. Returns the job this process still submits over
        the network (after the commit, with `finish`), or the owner with its attempts."""
        planned, told = sending.plan, sending.told
        await store.insert(tx, planned.attempts, now=now)
        await event_store.record_all_about(tx, told.subject, told.events, now=now)
        await self._record.count_answers(tx, told.state, planned.attempts, now)
        if planned.throttled:
            tx.after_commit(self.wake.set)
        return Submitted(planned.job, sending.answer)

    async def finish(self, submitted: Submitted, *, then: Then | None = None) -> object | None:
        """After the creating transaction: submit what is left over the network. Returns
        the owner as the last transaction loaded it (None: read it again). `then` runs in
        the unit that records the last carrier's answer, with the owner as it left it."""
        job = submitted.job
        if job is None:
            return submitted.latest
        return await self.dispatch(job if then is None else changed(job, then=then))

    # --- submitting ---------------------------------------------------------

    async def dispatch(self, job: Job | None) -> object | None:
        """Submit a leased attempt and record the answer; failover continues here.

        Returns the owner as the last transaction left it, when that
        transaction loaded it (None: read it again).
        """
        latest: object | None = None
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

    async def _submit_one(self, job: Job) -> tuple[Job | None, object | None]:
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
                docs=self._record.docs,
            )
            return await self._write_job(
                lambda tx: self._record.failed(tx, attempt, AttemptStatus.QUEUED, failure, now),
                job,
            )
        at = self._clock.now()
        oversized = at_once.too_long(carrier, job, self._leases, now=at)
        if oversized is not None:
            log.warning("delivery.sms_too_long carrier=%s attempt=%s", attempt.carrier, attempt.id)
            return await self._write_job(
                lambda tx: self._record.failed(tx, attempt, AttemptStatus.QUEUED, oversized, at),
                job,
            )
        try:
            receipt = await carrier.submit(job.sms)
        except CarrierError as error:
            return await self._submit_failed(job, error)
        now = self._clock.now()
        segments = receipt.billed(job.sms.body)
        key = (attempt.carrier, receipt.carrier_message_id)
        recorded = self._recording[key] = asyncio.Event()
        try:
            return await self._write_job(
                lambda tx: self._record.sent(tx, attempt, receipt, now, segments=segments),
                job,
            )
        finally:
            # Only our own entry: an SMSC that reused a message id must not
            # release (or crash) another submit's wait.
            if self._recording.get(key) is recorded:
                del self._recording[key]
            recorded.set()

    async def _submit_failed(
        self, job: Job, error: CarrierError
    ) -> tuple[Job | None, object | None]:
        attempt = job.attempt
        now = self._clock.now()
        decision = self._after_submit_error(error, job, now)
        if isinstance(decision, routing.Wait):
            until = decision.until
            await self._db.write(lambda tx: store.postpone(tx, attempt.id, until=until))
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
            lambda tx: self._record.failed(tx, attempt, AttemptStatus.QUEUED, decision, now),
            job,
        )

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
            docs=self._record.docs,
        )

    async def _write_job(
        self, work: Callable[[Tx], Awaitable[Step]], previous: Job
    ) -> tuple[Job | None, object | None]:
        """Run a unit of work that may open a failover attempt, and make that the next job.
        The job's `then` runs in it when it is the last (it opened none) and loaded the
        owner."""
        then, clock = previous.then, self._clock

        async def unit(tx: Tx) -> Step:
            step = await work(tx)
            if then is not None and step.following is None and step.latest is not None:
                await then(tx, step.latest, clock.now())
            return step

        step = await self._db.write(work if then is None else unit)
        if step.following is None:
            return None, step.latest
        return previous.following(step.following), None

    # --- receipts -----------------------------------------------------------

    async def on_report(self, report: DeliveryReport) -> None:
        """The sink every carrier reports to. Raises if it could not be recorded."""
        recording = self._recording.get((report.carrier, report.carrier_message_id))
        if recording is not None:
            await recording.wait()
        now = self._clock.now()
        step = await self._db.write(lambda tx: self._record.report(tx, report, now))
        if step.following is not None:
            await self._follow([step.following])

    # --- the loop's work ----------------------------------------------------

    async def work_waiting(self) -> tuple[bool, bool, bool]:
        now = self._clock.now()
        return await self._db.read(lambda tx: store.work_waiting(tx, now=now))

    async def claim(self, *, limit: int, busy: list[str]) -> list[Job]:
        """Lease queued attempts nobody is submitting, and build their SMS."""
        now = self._clock.now()
        until = now + self._lease
        ids = await self._db.write(
            lambda tx: store.claim_queued(
                tx, now=now, owner=self.owner, lease_until=until, limit=limit, busy=busy
            )
        )
        if not ids:
            return []

        async def build(tx: Tx) -> list[Job]:
            built = [await self._record.job_or_cancel(tx, attempt_id, now) for attempt_id in ids]
            return [job for job in built if job is not None]

        return await self._db.write(build)

    async def time_out_reports(self, *, limit: int = 100) -> int:
        """Fail over every sent attempt whose receipt deadline has passed."""
        now = self._clock.now()

        async def work(tx: Tx) -> list[AttemptRow]:
            following = []
            for attempt in await store.overdue_reports(tx, now=now, limit=limit):
                failure = routing.after_failure(
                    routing.REPORT_TIMEOUT,
                    attempt.route,
                    attempt.position,
                    now=now,
                    expires_at=await self._record.expires_at(tx, attempt, now),
                    docs=self._record.docs,
                )
                step = await self._record.failed(tx, attempt, AttemptStatus.SENT, failure, now)
                if step.following is not None:
                    following.append(step.following)
            return following

        opened = await self._db.write(work)
        await self._follow(opened)
        return len(opened)

    async def apply_early_reports(self, *, limit: int = 100) -> int:
        """Receipts parked while another process was still recording their submit.

        Returns how many failover attempts they opened.
        """
        now = self._clock.now()

        async def work(tx: Tx) -> list[AttemptRow]:
            reports = await early_reports.matched(tx, limit=limit)
            steps = [await self._record.report(tx, r, now) for r in reports]
            return [step.following for step in steps if step.following is not None]

        opened = await self._db.write(work)
        await self._follow(opened)
        return len(opened)

    async def prune(self) -> int:
        """Parked receipts that matched nothing for a day are for SMS this database never sent;
        erased attempts' message ids are forgotten once their window has passed."""
        now = self._clock.now()
        before = now - EARLY_REPORT_RETENTION
        pruned = await self._db.write(lambda tx: early_reports.prune(tx, before=before))
        return pruned + await self._db.write(lambda tx: erased_receipts.prune(tx, now=now))

    async def _follow(self, opened: list[AttemptRow]) -> None:
        """Submit failover attempts opened outside a dispatch, here if this process sends."""
        if not self.dispatching or not opened:
            return

        async def build(tx: Tx) -> list[Job | None]:
            now = self._clock.now()
            return [await self._record.job(tx, attempt, now) for attempt in opened]

        for job in await self._db.read(build):
            self.dispatch_soon(job)
