"""The sandbox carriers: test keys send through them, and nothing leaves the process.

Test keys route every channel through sandbox carriers: SMS through `sandbox`
then `sandbox-backup`, WhatsApp through `sandbox-whatsapp`, email through
`sandbox-email`. Magic destinations walk every delivery path. On the first
channel a verification asks for:

| phone number   | email local part  | what happens                                           |
|----------------|-------------------|--------------------------------------------------------|
| +15005550006   | anything else     | delivered                                              |
| +15005550001   | `fails-first@…`   | the channel's first carrier is unreachable: SMS goes   |
|                |                   | on to `sandbox-backup`, which delivers; WhatsApp and   |
|                |                   | email have one carrier, so the next channel is tried   |
| +15005550002   | `undeliverable@…` | accepted, then reported undeliverable, on every carrier|
| +15005550003   | `slow@…`          | delivered after `slow_delivery` seconds                |
| +15005550004   | `rejected@…`      | refused (rejected) by every carrier                    |

On a channel the verification falls back to (`channels`, after the first one),
every destination is delivered at once except the rejected one, which every
carrier of every channel refuses. So `["whatsapp", "sms"]` to +15005550001 or
+15005550002 fails on WhatsApp and delivers by SMS, and to +15005550004 fails
on both. The local parts match at any domain, in any case.
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
    Channel,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    SubmitReceipt,
)

log = logging.getLogger(__name__)

PRIMARY = "sandbox"
BACKUP = "sandbox-backup"
WHATSAPP = "sandbox-whatsapp"
EMAIL = "sandbox-email"
# Every test-key sandbox carrier, and the channel it serves.
TEST_KEY_CARRIERS: dict[str, Channel] = {
    PRIMARY: "sms",
    BACKUP: "sms",
    WHATSAPP: "whatsapp",
    EMAIL: "email",
}
# The carriers that fail the first-carrier magic destination: each channel's first.
_FAILS_FIRST = frozenset({PRIMARY, WHATSAPP, EMAIL})

FIRST_CARRIER_FAILS = "+15005550001"
UNDELIVERABLE = "+15005550002"
SLOW_DELIVERY = "+15005550003"
REJECTED = "+15005550004"

# The same scripts for email, by the address's local part.
_EMAIL_SCRIPTS = {
    "fails-first": FIRST_CARRIER_FAILS,
    "undeliverable": UNDELIVERABLE,
    "slow": SLOW_DELIVERY,
    "rejected": REJECTED,
}


def script_of(to: str) -> str | None:
    """Which magic destination `to` is, as its phone number: None for an ordinary one."""
    if "@" in to:
        return _EMAIL_SCRIPTS.get(to.rsplit("@", 1)[0].lower())
    return to if to in (FIRST_CARRIER_FAILS, UNDELIVERABLE, SLOW_DELIVERY, REJECTED) else None


class SandboxCarrier:
    """One sandbox route on one channel; every message it accepts is kept in `sent`
    (shared by all of them). For WhatsApp and email it keeps the message as given:
    the code is in its `passcode`."""

    def __init__(
        self,
        name: str = PRIMARY,
        *,
        channel: Channel = "sms",
        sent: deque[OutboundSms] | None = None,
        slow_delivery: float = 5.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._name = name
        self._channel: Channel = channel
        self.sent: deque[OutboundSms] = sent if sent is not None else deque(maxlen=1000)
        self._slow_delivery = slow_delivery
        self._clock = clock or (lambda: datetime.now(UTC))
        self._reports: ReportSink | None = None
        self._later: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self._name

    @property
    def channel(self) -> Channel:
        return self._channel

    async def start(self, reports: ReportSink) -> None:
        self._reports = reports

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        return self.submit_now(sms)

    def submit_now(self, sms: OutboundSms) -> SubmitReceipt:
        """`submit`, without waiting: the answer, and the message taken."""
        receipt = self.answer_now(sms)
        self.took(sms, receipt)
        return receipt

    def took(self, sms: OutboundSms, receipt: SubmitReceipt) -> None:
        """Keep the message, and report a slow one's delivery later."""
        self.sent.append(sms)
        if receipt.final is None:
            self._report_later(receipt.carrier_message_id)

    def answer_now(self, sms: OutboundSms) -> SubmitReceipt:
        """What the submit answers, with nothing kept or scheduled yet."""
        script = script_of(sms.to)
        if script == REJECTED:
            raise CarrierRejected("sandbox_rejected", "The sandbox route refused this destination.")
        if sms.fallback_channel:
            script = None
        if script == FIRST_CARRIER_FAILS and self._name in _FAILS_FIRST:
            raise CarrierUnavailable("sandbox_unreachable", "The sandbox route is down.")
        message_id = f"{self._name}-{sms.attempt_id}"
        if script == SLOW_DELIVERY:
            return SubmitReceipt(carrier_message_id=message_id)
        failed = script == UNDELIVERABLE
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
