"""The sandbox carrier: test keys send through it, and no SMS leaves the process."""

from __future__ import annotations

from collections import deque

from relay.carriers.base import OutboundSms, ReportSink, SubmitReceipt


class SandboxCarrier:
    """Keeps the last SMS it was given in memory, so tests and demos can read them."""

    def __init__(self, *, keep: int = 1000) -> None:
        self.sent: deque[OutboundSms] = deque(maxlen=keep)
        self._reports: ReportSink | None = None

    @property
    def name(self) -> str:
        return "sandbox"

    async def start(self, reports: ReportSink) -> None:
        self._reports = reports

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        self.sent.append(sms)
        return SubmitReceipt(carrier_message_id=f"sandbox-{sms.attempt_id}")

    async def close(self) -> None:
        self._reports = None
