"""The SMPP carrier against a real SMSC: encodings, windows, pacing, enquire links and binds."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from relay.carriers.base import (
    CarrierThrottled,
    CarrierUnavailable,
)
from tests.carriers.conftest import (
    ESME_RX_T_APPN,
    SMS,
    Reports,
    StartCarrier,
    StartPeer,
    settings,
)


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
