"""The SMPP carrier against a real SMSC: node-smpp's server, scripted per test."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from relay.carriers.base import (
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
)
from relay.carriers.smpp import SmppCarrier, SmppSettings
from tests.carriers.smpp_peer import SmppPeer

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
SMS = OutboundSms(attempt_id="att_1", to="+15558675310", sender="Relay", body="Your code is 482916")
ESME_RMSGQFUL, ESME_RTHROTTLED, ESME_RINVDSTADR, ESME_RX_T_APPN = 0x14, 0x58, 0x0B, 0x64

StartPeer = Callable[..., Awaitable[SmppPeer]]
StartCarrier = Callable[..., Awaitable[SmppCarrier]]


class Reports:
    """A report sink that remembers what it was given."""

    def __init__(self) -> None:
        self.items: list[DeliveryReport] = []
        self.fail = False
        self.log: list[str] = []
        self._changed = asyncio.Condition()

    async def __call__(self, report: DeliveryReport) -> None:
        if self.fail:
            raise RuntimeError("the database is down")
        self.log.append(f"report for {report.carrier_message_id}")
        async with self._changed:
            self.items.append(report)
            self._changed.notify_all()

    async def wait_for(self, count: int = 1, within: float = 3.0) -> list[DeliveryReport]:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.items) >= count)
        return self.items


@pytest_asyncio.fixture
async def start_peer(peer_dir: Path) -> AsyncIterator[StartPeer]:
    peers: list[SmppPeer] = []

    async def start(**config: Any) -> SmppPeer:
        peer = await SmppPeer.start(peer_dir, **config)
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        await peer.stop()


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest_asyncio.fixture
async def start_carrier(reports: Reports) -> AsyncIterator[StartCarrier]:
    carriers: list[SmppCarrier] = []

    async def start(port: int, **overrides: Any) -> SmppCarrier:
        carrier = SmppCarrier(replace(settings(port), **overrides), clock=lambda: NOW)
        carriers.append(carrier)
        await carrier.start(reports)
        return carrier

    yield start
    for carrier in carriers:
        await carrier.close()


def settings(port: int) -> SmppSettings:
    return SmppSettings(
        name="smsc-test",
        host="127.0.0.1",
        port=port,
        system_id="relay",
        password="secret",
        response_timeout=5.0,  # generous for loaded CI machines; tests of the timeout set their own
        enquire_link_interval=5.0,
        reconnect_backoff=(0.02, 0.1),
        throttle_retry_after=0.5,
        receipt_hold=1.0,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_submitted_sms_is_named_and_its_delivered_receipt_reaches_the_sink(
    start_peer: StartPeer, start_carrier: StartCarrier, reports: Reports
) -> None:
    peer = await start_peer(receipt={"stat": "DELIVRD", "form": "tlv"})
    carrier = await start_carrier(peer.port)

    receipt = await carrier.submit(SMS)

    submit = await peer.wait_for("submit")
    assert receipt.carrier_message_id == submit["message_id"]
    assert submit["registered_delivery"] == 1
    assert (submit["destination_addr"], submit["dest_addr_ton"]) == ("15558675310", 1)
    assert (submit["source_addr"], submit["source_addr_ton"]) == ("Relay", 5)
    assert await reports.wait_for() == [
        DeliveryReport("smsc-test", receipt.carrier_message_id, "delivered", None, NOW)
    ]
    acknowledged = await peer.wait_for("deliver_sm_resp")
    assert acknowledged["status"] == 0


async def test_receipt_without_tlv_is_matched_by_the_id_in_its_text(
    start_peer: StartPeer, start_carrier: StartCarrier, reports: Reports
) -> None:
    peer = await start_peer(receipt={"stat": "DELIVRD", "form": "text"})
    carrier = await start_carrier(peer.port)

    receipt = await carrier.submit(SMS)

    [report] = await reports.wait_for()
    assert (report.carrier_message_id, report.status) == (receipt.carrier_message_id, "delivered")


@pytest.mark.parametrize(
    ("stat", "err", "error_code"),
    [("UNDELIV", "012", "UNDELIV:012"), ("REJECTD", "000", "REJECTD"), ("EXPIRED", "", "EXPIRED")],
)
async def test_undelivered_receipt_is_reported_failed_with_its_stat_and_err(
    start_peer: StartPeer,
    start_carrier: StartCarrier,
    reports: Reports,
    stat: str,
    err: str,
    error_code: str,
) -> None:
    peer = await start_peer(receipt={"stat": stat, "err": err, "form": "text"})
    carrier = await start_carrier(peer.port)

    receipt = await carrier.submit(SMS)

    [report] = await reports.wait_for()
    assert report == DeliveryReport(
        "smsc-test", receipt.carrier_message_id, "failed", error_code, NOW
    )


async def test_receipt_sent_before_the_submit_resp_reaches_the_sink_after_submit_returns(
    start_peer: StartPeer, start_carrier: StartCarrier, reports: Reports
) -> None:
    peer = await start_peer(receipt={"stat": "DELIVRD", "form": "tlv", "before_resp": True})
    carrier = await start_carrier(peer.port)

    receipt = await carrier.submit(SMS)
    reports.log.append(f"submit returned {receipt.carrier_message_id}")
    await reports.wait_for()

    assert reports.log == [
        f"submit returned {receipt.carrier_message_id}",
        f"report for {receipt.carrier_message_id}",
    ]
    assert (await peer.wait_for("deliver_sm_resp"))["status"] == 0
    sent = [event["event"] for event in peer.events]
    assert sent.index("deliver_sm") < sent.index("submit_sm_resp"), "the receipt went first"


@pytest.mark.parametrize("status", [ESME_RTHROTTLED, ESME_RMSGQFUL])
async def test_throttled_submit_is_backoff_not_failure(
    start_peer: StartPeer, start_carrier: StartCarrier, status: int
) -> None:
    peer = await start_peer(submit="status", status=status)
    carrier = await start_carrier(peer.port, throttle_retry_after=0.5)

    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(SMS)
    with pytest.raises(CarrierThrottled) as still_throttled:
        await carrier.submit(SMS)

    assert throttled.value.code == f"smpp_0x{status:08x}"
    assert throttled.value.retry_after == 0.5
    assert 0 < still_throttled.value.retry_after <= 0.5
    await peer.wait_for("submit")
    assert len(peer.seen("submit")) == 1, "the second submit must not reach the SMSC"
    assert carrier.bound_sessions == 1


async def test_refused_submit_is_rejected_with_the_smpp_status_as_code(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer(submit="status", status=ESME_RINVDSTADR)
    carrier = await start_carrier(peer.port)

    with pytest.raises(CarrierRejected) as rejected:
        await carrier.submit(SMS)

    assert rejected.value.code == "smpp_0x0000000b"


async def test_bind_refused_for_a_wrong_password_makes_submit_unavailable(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer(password="other")
    carrier = await start_carrier(peer.port)

    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(SMS)

    assert unavailable.value.code == "smpp_bind_refused"
    assert "0x0000000e" in unavailable.value.message
    assert (await peer.wait_for("bind"))["ok"] is False
    assert peer.seen("submit") == []


async def test_unreachable_smsc_makes_submit_unavailable(start_carrier: StartCarrier) -> None:
    carrier = await start_carrier(closed_port())

    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(SMS)

    assert unavailable.value.code == "smpp_unreachable"


async def test_submit_without_a_response_is_unavailable_after_the_response_timeout(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer(submit="hold")
    carrier = await start_carrier(peer.port, response_timeout=0.3)

    started = time.monotonic()
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(SMS)

    assert unavailable.value.code == "smpp_timeout"
    # Upper bound loose for loaded CI machines; the default timeout is 10 s.
    assert 0.25 <= time.monotonic() - started < 3.0


async def test_a_submit_sent_after_an_answered_one_still_times_out_on_its_own_deadline(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    """Submits share one expiry timer: the one left behind an answered submit is still failed."""
    peer = await start_peer()
    carrier = await start_carrier(peer.port, response_timeout=0.5)
    await carrier.submit(SMS)
    await peer.command("configure", submit="hold")

    async with asyncio.timeout(5):
        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier.submit(SMS)

    assert unavailable.value.code == "smpp_timeout"
    assert len(peer.seen("submit")) == 2


async def test_dropped_connection_fails_inflight_submits_promptly_and_the_carrier_rebinds(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer(submit="hold", drop_at_outstanding=3)
    carrier = await start_carrier(
        peer.port, response_timeout=10.0, window=5, enquire_link_interval=0.05
    )

    started = time.monotonic()
    outcomes = await asyncio.gather(
        *(carrier.submit(SMS) for _ in range(3)), return_exceptions=True
    )

    assert time.monotonic() - started < 4.0, "in-flight submits must not wait for the timeout"
    assert [type(outcome) for outcome in outcomes] == [CarrierUnavailable] * 3
    assert {outcome.code for outcome in outcomes if isinstance(outcome, CarrierUnavailable)} == {
        "smpp_connection_lost"
    }
    await peer.command("configure", submit="accept", drop_at_outstanding=0)
    # The new session's first enquire_link shows the carrier has it bound.
    await peer.wait_for("enquire_link", session=2)
    receipt = await carrier.submit(SMS)
    assert receipt.carrier_message_id == (await peer.wait_for("submit", count=4))["message_id"]


@pytest.mark.parametrize(
    ("body", "data_coding"),
    [
        ("Your code is 482916", 0),
        ("Code: [482916] costs 0€ @ Relay_", 0),
        ("Ваш код: 482916", 8),
        ("Your code is 482916 🔐", 8),
    ],
)
async def test_text_goes_as_gsm7_when_it_can_and_ucs2_otherwise(
    start_peer: StartPeer, start_carrier: StartCarrier, body: str, data_coding: int
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port)

    await carrier.submit(replace(SMS, body=body))

    submit = await peer.wait_for("submit")
    assert (submit["data_coding"], submit["text"]) == (data_coding, body)


async def test_text_longer_than_one_sms_goes_in_message_payload(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port)
    body = "Your Relay code is 482916. " * 7

    await carrier.submit(replace(SMS, body=body))

    submit = await peer.wait_for("submit")
    assert (submit["text"], submit["payload_text"]) in ((None, body), ("", body))


async def test_window_bounds_the_submits_outstanding_at_the_smsc(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer(delay_ms=40)
    carrier = await start_carrier(peer.port, window=2)

    receipts = await asyncio.gather(*(carrier.submit(SMS) for _ in range(6)))

    assert len({receipt.carrier_message_id for receipt in receipts}) == 6
    await peer.wait_for("submit", count=6)
    assert max(submit["outstanding"] for submit in peer.seen("submit")) == 2


async def test_max_per_second_spaces_submits_out(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port, max_per_second=20.0)

    started = time.monotonic()
    await asyncio.gather(*(carrier.submit(SMS) for _ in range(5)))

    assert time.monotonic() - started >= 4 / 20 - 0.01
    await peer.wait_for("submit", count=5)


async def test_submit_that_would_queue_past_the_response_timeout_is_throttled(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port, max_per_second=4.0, response_timeout=0.3)

    outcomes = await asyncio.gather(
        *(carrier.submit(SMS) for _ in range(3)), return_exceptions=True
    )

    throttled = [outcome for outcome in outcomes if isinstance(outcome, CarrierThrottled)]
    assert [outcome.code for outcome in throttled] == ["smpp_rate_limited"]
    await peer.wait_for("submit", count=2)
    assert len(peer.seen("submit")) == 2


async def test_enquire_link_keeps_an_idle_bind_alive(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port, enquire_link_interval=0.05)

    await peer.wait_for("enquire_link", count=3)

    assert carrier.bound_sessions == 1
    assert len(peer.seen("bind")) == 1


async def test_unanswered_enquire_link_drops_the_bind_and_the_carrier_rebinds(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer(answer_enquire_link=False)
    await start_carrier(peer.port, enquire_link_interval=0.05, response_timeout=0.2)

    await peer.wait_for("close", session=1)
    await peer.wait_for("bind", session=2)


async def test_each_configured_bind_is_opened(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port, binds=3)

    assert carrier.bound_sessions == 3
    await peer.wait_for("bind", ok=True, system_id="relay", count=3)


async def test_close_unbinds_and_later_submits_are_unavailable(
    start_peer: StartPeer, start_carrier: StartCarrier
) -> None:
    peer = await start_peer()
    carrier = await start_carrier(peer.port)

    await carrier.close()

    await peer.wait_for("unbind")
    with pytest.raises(CarrierUnavailable):
        await carrier.submit(SMS)


async def test_receipt_the_sink_could_not_take_is_answered_with_a_temporary_error(
    start_peer: StartPeer, start_carrier: StartCarrier, reports: Reports
) -> None:
    peer = await start_peer(receipt={"stat": "DELIVRD", "form": "tlv"})
    carrier = await start_carrier(peer.port)
    reports.fail = True

    await carrier.submit(SMS)

    answered = await peer.wait_for("deliver_sm_resp")
    assert answered["status"] == ESME_RX_T_APPN


async def test_intermediate_receipt_is_acknowledged_but_not_reported(
    start_peer: StartPeer, start_carrier: StartCarrier, reports: Reports
) -> None:
    peer = await start_peer(receipt={"stat": "ENROUTE", "form": "text"})
    carrier = await start_carrier(peer.port)

    await carrier.submit(SMS)

    assert (await peer.wait_for("deliver_sm_resp"))["status"] == 0
    assert reports.items == []


def test_settings_refuse_what_smpp_cannot_carry() -> None:
    with pytest.raises(ValueError, match="password"):
        replace(settings(2775), password="longer-than-8")
    with pytest.raises(ValueError, match="reconnect_backoff"):
        replace(settings(2775), reconnect_backoff=(5.0, 1.0))
