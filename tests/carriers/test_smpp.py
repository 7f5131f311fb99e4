"""The SMPP carrier against a real SMSC: submits, receipts and failures."""

from __future__ import annotations

import asyncio
import time

import pytest

from relay.carriers.base import (
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    DeliveryReport,
)
from tests.carriers.conftest import (
    ESME_RINVDSTADR,
    ESME_RMSGQFUL,
    ESME_RTHROTTLED,
    NOW,
    SMS,
    Reports,
    StartCarrier,
    StartPeer,
    closed_port,
)


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
