"""The port every carrier implements, and the values that cross it.

Carriers are edges: they speak a network protocol. The failover policy that
decides what to do with their answers lives in `relay.carriers.routing` and is
pure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

from relay.records import fast_init
from relay.sms.encoding import segment_count

ReportStatus = Literal["delivered", "failed"]

# What a carrier reaches people through. A verification asks for one or an ordered
# list of them; each carrier serves exactly one (`Carrier.channel`).
Channel = Literal["sms", "whatsapp", "email"]
CHANNELS: tuple[Channel, ...] = ("sms", "whatsapp", "email")
# Channels whose destination is a phone number (E.164); `email`'s is an address.
PHONE_CHANNELS: frozenset[Channel] = frozenset({"sms", "whatsapp"})


@fast_init
@dataclass(frozen=True)
class Passcode:
    """The code and what its words are made of, for a carrier that writes its own message.

    An SMS carrier sends `OutboundSms.body` as it is; a channel with its own
    format (a WhatsApp template's parameter, an email's parts) builds it from
    this. `code` is secret: never log it.
    """

    code: str
    brand: str
    locale: str
    expires_at: datetime
    # The account's own text per channel ("sms", "email") for this locale, when it has one;
    # `relay.sms.custom.render_text(passcode, channel, now=...)` picks it or Relay's words.
    templates: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@fast_init
@dataclass(frozen=True)
class OutboundSms:
    """One message to submit. `body` and `passcode` hold the code: never log them."""

    attempt_id: str
    to: str
    sender: str
    body: str
    passcode: Passcode | None = None
    # Sent on a channel its verification falls back to, not the first one it asked
    # for. Carriers send the same either way; the sandbox scripts its magic
    # destinations on the first channel only, so that fallback can be tried.
    fallback_channel: bool = False


@fast_init
@dataclass(frozen=True)
class DeliveryReport:
    """What a carrier later says about an SMS it accepted.

    Carriers may report one SMS twice (an SMSC resending an unacknowledged
    receipt, a webhook retried); the delivery layer applies only the first.
    """

    carrier: str
    carrier_message_id: str
    status: ReportStatus
    error_code: str | None
    at: datetime


@fast_init
@dataclass(frozen=True)
class SubmitReceipt:
    """The carrier accepted the SMS and named it `carrier_message_id`.

    `final` is set by a carrier that knows the outcome at once (the sandbox):
    the delivery layer records it with the submit, in one transaction.
    `segments` is what the carrier bills this SMS as, when it is known.
    """

    carrier_message_id: str
    final: DeliveryReport | None = None
    segments: int | None = None

    def billed(self, body: str) -> int:
        """Segments this SMS is billed as: the carrier's count, else GSM 03.38 arithmetic."""
        return segment_count(body) if self.segments is None else self.segments


class CarrierError(Exception):
    """A submit that did not succeed; subclasses say whether failover helps."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CarrierRejected(CarrierError):
    """The carrier refused this SMS: try the next carrier."""


class CarrierUnavailable(CarrierError):
    """The carrier cannot be reached or is not bound: try the next carrier.

    A timeout after the request left may still deliver: failing over then can
    send the handset the same code twice, which costs money, never correctness.
    """


class CarrierThrottled(CarrierError):
    """The carrier asks us to slow down: back off on it, this is not a failure."""

    def __init__(self, code: str, message: str, *, retry_after: float) -> None:
        super().__init__(code, message)
        self.retry_after = retry_after


ReportSink = Callable[[DeliveryReport], Awaitable[None]]


class Carrier(Protocol):
    """A route to people on one channel. `start` wires the sink that receives delivery
    reports. `channel` never changes: routes are checked against it."""

    @property
    def name(self) -> str: ...

    @property
    def channel(self) -> Channel: ...

    async def start(self, reports: ReportSink) -> None: ...

    async def submit(self, sms: OutboundSms) -> SubmitReceipt: ...

    async def close(self) -> None: ...


@runtime_checkable
class AnswersAtOnce(Protocol):
    """A carrier that decides without any I/O (the sandbox).

    Its answer is recorded in the transaction that queued the SMS, so a send
    through it costs one transaction instead of two. `answer_now` says what
    `submit` would answer, raising the same errors, and does nothing else:
    that transaction may still roll back (a duplicate request under its
    Idempotency-Key). `took` is what the submit does, called once the
    transaction has committed.
    """

    def answer_now(self, sms: OutboundSms) -> SubmitReceipt: ...

    def took(self, sms: OutboundSms, receipt: SubmitReceipt) -> None: ...
