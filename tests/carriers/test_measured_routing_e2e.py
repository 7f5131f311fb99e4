"""Routing by measured delivery end to end: Relay over HTTPS, a measured route over two
real SMSCs (node-smpp), the server's clock moved to let figures age.

`first` heads the route and delivers until the test makes it refuse every
submit; once its last hour shows it below the minimum rate, sends go to
`second` first, and `/metrics` says why. When its failures leave the hour,
`first` is back in its configured place.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from relay.clock import OffsetClock
from tests.carriers.live_client import live_client
from tests.carriers.reading import attempts, settle
from tests.carriers.smpp_peer import SmppPeer
from tests.harness import RunningServer, ServerThread, test_settings
from tests.metrics.scenario import value
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

ESME_RSUBMITFAIL = 0x45
DELIVERED = {"stat": "DELIVRD", "form": "tlv"}
MIN_SAMPLE = 4
_numbers = itertools.count(3000)


def number() -> str:
    return f"+1415557{next(_numbers) % 10000:04d}"


def smpp(peer: SmppPeer) -> dict[str, Any]:
    return peer.carrier_table(receipt_timeout=5.0)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def peers(peer_dir: Path) -> AsyncIterator[tuple[SmppPeer, SmppPeer]]:
    first = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    second = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    try:
        yield first, second
    finally:
        for peer in (first, second):
            await peer.stop()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    peers: tuple[SmppPeer, SmppPeer],
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "measured", tmp_path_factory.mktemp("db"))
    first, second = peers
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        carriers={"first": smpp(first), "second": smpp(second)},
        routes={
            "default": {
                "carriers": ["first", "second"],
                "strategy": "measured",
                "min_sample": MIN_SAMPLE,
                "explore": 0.0,
            }
        },
    )
    with ServerThread(settings) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


async def send(live: httpx.AsyncClient) -> list[tuple[str, str, str | None]]:
    """One verification through the API; its attempts once one was delivered."""
    created = await live.post("/v1/verifications", json={"to": number()})
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


async def test_a_carrier_that_stops_delivering_goes_last_and_comes_back_when_its_hour_passes(
    live: httpx.AsyncClient, server: RunningServer, peers: tuple[SmppPeer, SmppPeer]
) -> None:
    first, _ = peers
    start_of_a_minute(server.clock)
    assert await send(live) == [("first", "delivered", None)]

    await first.command("configure", submit="status", status=ESME_RSUBMITFAIL)
    for _ in range(MIN_SAMPLE):
        assert await send(live) == [
            ("first", "failed", "carrier_rejected"),
            ("second", "delivered", None),
        ]
    # Figures are read once a minute: within this one, the route is still as configured.
    assert (await send(live))[0][0] == "first"

    start_of_a_minute(server.clock)
    assert await send(live) == [("second", "delivered", None)]
    assert await ratios(server) == {"first": 1 / 6, "second": 1.0}

    await first.command("configure", submit="accept", status=0, receipt=DELIVERED)
    assert await send(live) == [("second", "delivered", None)]

    server.clock.advance(3600)
    start_of_a_minute(server.clock)
    assert await send(live) == [("first", "delivered", None)]
