"""A measured route over two real SMSCs, as the end-to-end tests drive and read it."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from relay.clock import OffsetClock
from tests.carriers.reading import attempts, settle
from tests.carriers.smpp_peer import SmppPeer
from tests.harness import RunningServer
from tests.metrics.scenario import value

ESME_RSUBMITFAIL = 0x45
DELIVERED = {"stat": "DELIVRD", "form": "tlv"}


def smpp(peer: SmppPeer) -> dict[str, Any]:
    return peer.carrier_table(receipt_timeout=5.0)


async def send(live: httpx.AsyncClient, to: str) -> list[tuple[str, str, str | None]]:
    """One verification through the API; its attempts once one was delivered."""
    created = await live.post("/v1/verifications", json={"to": to})
    assert created.status_code == 200, created.text
    body = await settle(
        live,
        f"/v1/verifications/{created.json()['id']}",
        lambda b: bool(b["attempts"]) and b["attempts"][-1]["status"] == "delivered",
    )
    return attempts(body)


async def ratios(server: RunningServer) -> dict[str, float]:
    """The delivery ratio per carrier in the US, as /metrics exports it (read from loopback)."""
    async with httpx.AsyncClient(base_url=server.base_url, verify=server.tls_context()) as monitor:
        answer = await monitor.get("/metrics")
    assert answer.status_code == 200, answer.text
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }
    return {
        carrier: value(samples, "relay_sms_delivery_ratio", carrier=carrier, country="US")
        for carrier in ("first", "second")
    }


def start_of_a_minute(clock: OffsetClock) -> None:
    """Move the clock to one second past a minute: a phase of the test then ends within it."""
    clock.advance(61 - clock.now().second - clock.now().microsecond / 1e6)
