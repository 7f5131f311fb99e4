"""The sandbox carriers: test keys send through them, and no SMS leaves the process.

Test keys route through two of them, `sandbox` then `sandbox-backup`, so the
contract's test numbers can walk every delivery path:

| number         | what happens                                                   |
|----------------|----------------------------------------------------------------|
| +15005550006   | delivered                                                      |
| +15005550001   | `sandbox` is unreachable; `sandbox-backup` delivers            |
| +15005550002   | accepted, then reported undeliverable, on every carrier        |
| +15005550003   | delivered after `slow_delivery` seconds                        |
| +15005550004   | refused (rejected) by every carrier                            |
| anything else  | delivered                                                      |
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

from relay.carriers.base import (
    CarrierRejected,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    SubmitReceipt,
)

log = logging.getLogger(__name__)

PRIMARY = "sandbox"
BACKUP = "sandbox-backup"

FIRST_CARRIER_FAILS = "+15005550001"
UNDELIVERABLE = "+15005550002"
SLOW_DELIVERY = "+15005550003"
REJECTED = "+15005550004"


class SandboxCarrier:
    """One sandbox route; every SMS it accepts is kept in `sent` (shared by both routes)."""

    def __init__(
        self,
        name: str = PRIMARY,
        *,
        sent: deque[OutboundSms] | None = None,
        slow_delivery: float = 5.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._name = name
        self.sent: deque[OutboundSms] = sent if sent is not None else deque(maxlen=1000)
        self._slow_delivery = slow_delivery
        self._clock = clock or (lambda: datetime.now(UTC))
        self._reports: ReportSink | None = None
        self._later: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self._name

    async def start(self, reports: ReportSink) -> None:
        self._reports = reports

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        return self.submit_now(sms)

    def submit_now(self, sms: OutboundSms) -> SubmitReceipt:
        if sms.to == FIRST_CARRIER_FAILS and self._name == PRIMARY:
            raise CarrierUnavailable("sandbox_unreachable", "The sandbox route is down.")
        if sms.to == REJECTED:
            raise CarrierRejected("sandbox_rejected", "The sandbox route refused this number.")
        self.sent.append(sms)
        message_id = f"{self._name}-{sms.attempt_id}"
        if sms.to == SLOW_DELIVERY:
            self._report_later(message_id)
            return SubmitReceipt(carrier_message_id=message_id)
        failed = sms.to == UNDELIVERABLE
        final = DeliveryReport(
            carrier=self._name,
            carrier_message_id=message_id,
            status="failed" if failed else "delivered",
            error_code="UNDELIV" if failed else None,
            at=self._clock(),
        )
        return SubmitReceipt(carrier_message_id=message_id, final=final)

    def _report_later(self, message_id: str) -> None:
        task = asyncio.create_task(self._deliver_after(message_id))
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _deliver_after(self, message_id: str) -> None:
        await asyncio.sleep(self._slow_delivery)
        if self._reports is None:
            return
        report = DeliveryReport(
            carrier=self._name,
            carrier_message_id=message_id,
            status="delivered",
            error_code=None,
            at=self._clock(),
        )
        try:
            await self._reports(report)
        except Exception:
            # The receipt deadline fails this attempt over; nothing is lost but time.
            log.exception("sandbox.report_failed")

    async def close(self) -> None:
        for task in list(self._later):
            task.cancel()
        await asyncio.gather(*self._later, return_exceptions=True)
        self._reports = None
