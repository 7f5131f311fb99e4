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

import httpx
import pytest
import pytest_asyncio

from tests.carriers import measured_routes
from tests.carriers.live_client import live_client
from tests.carriers.measured_routes import (
    DELIVERED,
    ESME_RSUBMITFAIL,
    ratios,
    smpp,
    start_of_a_minute,
)
from tests.carriers.smpp_peer import SmppPeer
from tests.harness import RunningServer, ServerThread, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

MIN_SAMPLE = 4
_numbers = itertools.count(3000)


def number() -> str:
    return f"+1415557{next(_numbers) % 10000:04d}"


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
    return await measured_routes.send(live, number())


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
