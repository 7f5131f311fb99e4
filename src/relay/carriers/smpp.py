"""SMPP 3.4 as a carrier: persistent transceiver binds to an operator's SMSC.

Library choice. The PDU codec is smpplib's (mature, pure Python), reached only
through the typed `relay.carriers.smpp_codec`, which packs and reads the four
PDUs of every SMS itself; the session around it (framing,
request/response pairing, window, enquire_link, timeouts) is asyncio code in
`relay.carriers.smpp_session`. smpplib's own `Client` was not used because it
is blocking: one listener thread per bind, PDU errors raised inside that
thread, and no pairing of submit_sm_resp with its submit_sm, so we would have
written that pairing anyway and added thread hand-offs on top. smpp34 1.5.0
(asyncio over a Rust core, typed and fastest) was tried first and rejected for
now: on this machine the interpreter aborted or segfaulted at exit in about one
run in three once a client had been used, its `window_size` did not bound the
outstanding submit_sm (the peer saw 5 with a window of 2), its enquire_link
interval and response timeout cannot be set from Python, and a bind refused
with a header-only bind_transceiver_resp (as node-smpp, and many SMSCs, send
it) surfaced only as "bind timed out" after 10 s. aiosmpplib is a queue-and-hooks framework whose
submits do not return their submit_sm_resp to the caller, which fights
`submit() -> SubmitReceipt` and the failover contract.

What the carrier promises:

* `binds` transceiver sessions, each re-established with jittered exponential
  backoff when it drops or cannot bind; `start` returns once each has been
  tried once, and `submit` never waits for a bind: no live bind means
  `CarrierUnavailable` at once, so routing can fail over.
* At most `window` submit_sm outstanding per bind, at most `max_per_second`
  submits per carrier (a submit that would wait longer than
  `response_timeout` for its turn is `CarrierThrottled` instead).
* ESME_RTHROTTLED and ESME_RMSGQFUL are `CarrierThrottled`, and every submit
  in the next `throttle_retry_after` seconds is too, without reaching the
  SMSC. Other non-zero statuses are `CarrierRejected("smpp_0x%08x")`.
* A submit whose connection drops, or whose response does not come within
  `response_timeout`, is `CarrierUnavailable` (the SMSC may still deliver it);
  so is one that found every window slot busy for `response_timeout` (never
  sent, code `smpp_window_timeout`).
* Final delivery receipts (DELIVRD, UNDELIV, REJECTD, EXPIRED, DELETED,
  UNKNOWN) reach the sink before their deliver_sm is answered; if the sink
  raises, the answer is ESME_RX_T_APPN so the SMSC sends it again. A receipt
  that overtakes its submit_sm_resp waits (up to `receipt_hold`) until
  `submit` has returned that id. ENROUTE/ACCEPTD and MO messages are only
  acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from relay.carriers import smpp_codec as codec
from relay.carriers.base import (
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    Channel,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    SubmitReceipt,
)
from relay.carriers.smpp_pacing import Backoff, Pacer
from relay.carriers.smpp_receipts import ReceiptGate, parse_receipt
from relay.carriers.smpp_session import (
    BindRefusedError,
    SessionClosedError,
    SessionConfig,
    SmppSession,
    WindowTimeoutError,
)
from relay.sms.encoding import encode_gsm7, is_gsm7, segment_count

__all__ = ["SmppCarrier", "SmppSettings"]

_log = logging.getLogger(__name__)

_THROTTLE_STATUSES: Final = frozenset({codec.ESME_RTHROTTLED, codec.ESME_RMSGQFUL})
_DATA_CODING_GSM7: Final = 0x00
_DATA_CODING_UCS2: Final = 0x08
_TON_ALPHANUMERIC: Final = 5
_NPI_UNKNOWN: Final = 0
# A session that stayed up this long was healthy: the next drop starts the
# backoff again from its minimum instead of where it left off.
_HEALTHY_SESSION_SECONDS: Final = 30.0
# C-Octet String limits of SMPP 3.4, terminating NUL excluded.
_MAX_SYSTEM_ID, _MAX_PASSWORD, _MAX_SYSTEM_TYPE, _MAX_ADDRESS = 15, 8, 12, 20


@dataclass(frozen=True, kw_only=True)
class SmppSettings:
    """One SMSC account bound as a Relay carrier.

    `source_addr` None sends each SMS from its own `sender` as an alphanumeric
    id (TON 5, NPI 0); set it to send every SMS from that address with
    `source_ton`/`source_npi` instead. `window` is per bind; `max_per_second`
    is for the whole carrier. `reconnect_backoff` is (first, longest) delay.
    """

    name: str
    host: str
    port: int
    system_id: str
    password: str = field(repr=False)
    system_type: str = ""
    source_addr: str | None = None
    source_ton: int = 1
    source_npi: int = 1
    binds: int = 1
    window: int = 10
    max_per_second: float | None = None
    enquire_link_interval: float = 30.0
    response_timeout: float = 10.0
    bind_timeout: float = 10.0
    reconnect_backoff: tuple[float, float] = (0.5, 30.0)
    throttle_retry_after: float = 1.0
    receipt_hold: float = 2.0

    def __post_init__(self) -> None:
        _check(bool(self.name), "name must not be empty")
        _check(bool(self.host), "host must not be empty")
        _check(0 < self.port < 65536, "port must be 1-65535")
        _check(_c_string(self.system_id, _MAX_SYSTEM_ID, empty=False), "system_id: 1-15 ASCII")
        _check(_c_string(self.password, _MAX_PASSWORD), "password: at most 8 ASCII characters")
        _check(_c_string(self.system_type, _MAX_SYSTEM_TYPE), "system_type: at most 12 ASCII")
        _check(
            self.source_addr is None or _c_string(self.source_addr, _MAX_ADDRESS, empty=False),
            "source_addr: 1-20 ASCII characters",
        )
        _check(0 <= self.source_ton <= 255 and 0 <= self.source_npi <= 255, "TON/NPI are octets")
        _check(self.binds >= 1 and self.window >= 1, "binds and window must be at least 1")
        _check(
            self.max_per_second is None or _positive(self.max_per_second),
            "max_per_second must be positive",
        )
        for name in ("enquire_link_interval", "response_timeout", "bind_timeout", "receipt_hold"):
            _check(_positive(getattr(self, name)), f"{name} must be positive")
        _check(self.throttle_retry_after >= 0, "throttle_retry_after must not be negative")
        first, longest = self.reconnect_backoff
        _check(_positive(first) and first <= longest, "reconnect_backoff: 0 < first <= longest")


class SmppCarrier:
    """Sends SMS over SMPP 3.4 transceiver binds; see the module docstring."""

    def __init__(
        self, settings: SmppSettings, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._settings = settings
        self._clock = clock or _utc_now
        self._session_config = SessionConfig(
            host=settings.host,
            port=settings.port,
            system_id=settings.system_id,
            password=settings.password,
            system_type=settings.system_type,
            window=settings.window,
            enquire_link_interval=settings.enquire_link_interval,
            response_timeout=settings.response_timeout,
            bind_timeout=settings.bind_timeout,
        )
        self._pacer = Pacer(settings.max_per_second, max_delay=settings.response_timeout)
        self._gate = ReceiptGate(settings.receipt_hold)
        self._reports: ReportSink | None = None
        self._binds: list[_Bind] = []
        self._closed = False

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def channel(self) -> Channel:
        return "sms"

    @property
    def bound_sessions(self) -> int:
        """How many binds are up right now, for health checks."""
        return sum(1 for bind in self._binds if bind.session and bind.session.is_open)

    async def start(self, reports: ReportSink) -> None:
        if self._binds or self._closed:
            raise RuntimeError(f"carrier {self.name} was already started")
        self._reports = reports
        self._binds = [_Bind(number) for number in range(self._settings.binds)]
        for bind in self._binds:
            bind.task = asyncio.create_task(self._supervise(bind), name=f"smpp-{self.name}")
        await asyncio.gather(*(bind.tried.wait() for bind in self._binds))

    async def close(self) -> None:
        self._closed = True
        sessions = [bind.session for bind in self._binds if bind.session is not None]
        tasks = [bind.task for bind in self._binds if bind.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(session.unbind() for session in sessions))

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        build = self._submit_sm(sms)
        self._pick_session()  # fail over at once rather than wait a turn for nothing
        await self._wait_turn()
        session = self._pick_session()
        try:
            answer = await session.submit(build)
        except SessionClosedError as exc:
            raise CarrierUnavailable("smpp_connection_lost", str(exc)) from exc
        except WindowTimeoutError as exc:
            raise CarrierUnavailable("smpp_window_timeout", str(exc)) from exc
        except TimeoutError as exc:
            # The SMSC may have accepted (and will deliver) this SMS: whoever
            # fails over on this code risks sending the user a second one.
            raise CarrierUnavailable(
                "smpp_timeout", f"no submit_sm_resp within {self._settings.response_timeout}s"
            ) from exc
        return self._receipt(answer, sms)

    def _submit_sm(self, sms: OutboundSms) -> Callable[[int], bytes]:
        source, ton, npi = self._source(sms)
        data_coding, message = _encode(sms.body)
        as_payload = segment_count(sms.body) > 1
        destination = sms.to.removeprefix("+")

        def build(sequence: int) -> bytes:
            return codec.submit_sm(
                sequence,
                source_addr=source,
                source_addr_ton=ton,
                source_addr_npi=npi,
                destination_addr=destination,
                data_coding=data_coding,
                message=message,
                as_payload=as_payload,
            )

        return build

    def _source(self, sms: OutboundSms) -> tuple[str, int, int]:
        settings = self._settings
        if settings.source_addr is not None:
            return settings.source_addr, settings.source_ton, settings.source_npi
        if not _c_string(sms.sender, _MAX_ADDRESS, empty=False):
            raise CarrierRejected("smpp_invalid_sender", "sender must be 1-20 ASCII characters")
        return sms.sender, _TON_ALPHANUMERIC, _NPI_UNKNOWN

    async def _wait_turn(self) -> None:
        delay = self._pacer.reserve()
        if delay > 0:
            await asyncio.sleep(delay)

    def _pick_session(self) -> SmppSession:
        if self._closed or not self._binds:
            raise CarrierUnavailable("smpp_not_started", f"carrier {self.name} is not running")
        live = [bind.session for bind in self._binds if bind.session and bind.session.is_open]
        if live:
            return max(live, key=lambda session: session.free_slots)
        failure = self._binds[0].failure
        raise CarrierUnavailable(failure.code, failure.message)

    def _receipt(self, answer: codec.Pdu, sms: OutboundSms) -> SubmitReceipt:
        status = answer.status
        if status == codec.ESME_ROK and answer.command_id == codec.SUBMIT_SM_RESP:
            if not answer.message_id:
                raise CarrierUnavailable("smpp_bad_response", "submit_sm_resp without message_id")
            _log.info("smpp accepted attempt=%s id=%s", sms.attempt_id, answer.message_id)
            self._gate.submitted(answer.message_id)
            return SubmitReceipt(carrier_message_id=answer.message_id)
        code = f"smpp_0x{status:08x}"
        if status in _THROTTLE_STATUSES:
            retry_after = self._settings.throttle_retry_after
            self._pacer.pause(retry_after, code)
            _log.warning("smpp throttled carrier=%s code=%s", self.name, code)
            raise CarrierThrottled(code, "the SMSC asks us to slow down", retry_after=retry_after)
        if status == codec.ESME_ROK:
            raise CarrierUnavailable("smpp_bad_response", f"answered by 0x{answer.command_id:08x}")
        _log.warning("smpp rejected attempt=%s code=%s", sms.attempt_id, code)
        raise CarrierRejected(code, f"submit_sm refused with command_status 0x{status:08x}")

    async def _supervise(self, bind: _Bind) -> None:
        backoff = Backoff(*self._settings.reconnect_backoff)
        while True:
            try:
                session = await SmppSession.open(self._session_config, self._on_deliver)
            except (OSError, TimeoutError, SessionClosedError) as exc:
                bind.failure = _bind_failure(exc)
                _log.warning("smpp bind failed carrier=%s: %s", self.name, bind.failure.message)
            else:
                await self._hold(bind, session, backoff)
            bind.tried.set()
            await asyncio.sleep(backoff.next())

    async def _hold(self, bind: _Bind, session: SmppSession, backoff: Backoff) -> None:
        _log.info("smpp bound carrier=%s bind=%d", self.name, bind.number)
        bind.session = session
        bind.tried.set()
        since = time.monotonic()
        try:
            await session.wait_closed()
        finally:
            bind.session = None
        bind.failure = CarrierUnavailable("smpp_connection_lost", session.close_reason)
        _log.warning("smpp bind lost carrier=%s: %s", self.name, session.close_reason)
        if time.monotonic() - since >= _HEALTHY_SESSION_SECONDS:
            backoff.reset()

    async def _on_deliver(self, pdu: codec.Pdu) -> int:
        receipt = parse_receipt(pdu)
        if receipt is None or self._reports is None:
            return codec.ESME_ROK
        await self._gate.wait(receipt.message_id)
        report = DeliveryReport(
            carrier=self.name,
            carrier_message_id=receipt.message_id,
            status=receipt.status,
            error_code=receipt.error_code,
            at=self._clock(),
        )
        try:
            await self._reports(report)
        except Exception:
            _log.exception("report sink failed carrier=%s id=%s", self.name, receipt.message_id)
            return codec.ESME_RX_T_APPN
        return codec.ESME_ROK


@dataclass(eq=False)
class _Bind:
    number: int
    session: SmppSession | None = None
    failure: CarrierUnavailable = field(
        default_factory=lambda: CarrierUnavailable("smpp_not_bound", "not bound yet")
    )
    tried: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


def _encode(body: str) -> tuple[int, bytes]:
    if is_gsm7(body):
        return _DATA_CODING_GSM7, encode_gsm7(body)
    return _DATA_CODING_UCS2, body.encode("utf-16-be")


def _bind_failure(exc: BaseException) -> CarrierUnavailable:
    if isinstance(exc, BindRefusedError):
        return CarrierUnavailable("smpp_bind_refused", str(exc))
    if isinstance(exc, TimeoutError):
        return CarrierUnavailable("smpp_timeout", "no answer while connecting or binding")
    return CarrierUnavailable("smpp_unreachable", f"{type(exc).__name__}: {exc}")


def _c_string(value: str, longest: int, *, empty: bool = True) -> bool:
    return value.isascii() and len(value) <= longest and (empty or bool(value))


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"SmppSettings: {message}")


def _utc_now() -> datetime:
    return datetime.now(UTC)
