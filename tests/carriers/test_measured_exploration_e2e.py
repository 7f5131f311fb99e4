"""Exploration on a measured route, end to end: a demoted carrier still heads a share of
sends, so that it is measured again.

Relay over HTTPS, a measured route over two real SMSCs (node-smpp), the
server's clock moved to let figures age. The explore draw, uniform in [0, 1)
in production, is scripted here: it walks the grid 0, 1/4, 2/4, 3/4 over and
over, so with `explore = 0.25` exactly one send in every four consecutive
ones draws below it, and which ones is known.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.carriers.live_client import live_client
from tests.carriers.measured_routes import (
    DELIVERED,
    ESME_RSUBMITFAIL,
    ratios,
    send,
    smpp,
    start_of_a_minute,
)
from tests.carriers.smpp_peer import SmppPeer
from tests.harness import RunningServer, ServerThread, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

MIN_SAMPLE = 4
EXPLORE = 0.25
_numbers = itertools.count(4000)


def number() -> str:
    return f"+1415558{next(_numbers) % 10000:04d}"


class GridDraws:
    """Draws 0, 0.25, 0.5, 0.75, 0, … and remembers each one, in the server's thread."""

    def __init__(self) -> None:
        self._grid = itertools.cycle((0.0, 0.25, 0.5, 0.75))
        self._lock = threading.Lock()
        self.taken: list[float] = []

    def __call__(self) -> float:
        with self._lock:
            drawn = next(self._grid)
            self.taken.append(drawn)
            return drawn


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
def draws() -> GridDraws:
    return GridDraws()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    peers: tuple[SmppPeer, SmppPeer],
    draws: GridDraws,
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "exploration", tmp_path_factory.mktemp("db"))
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
                "explore": EXPLORE,
            }
        },
    )
    with ServerThread(settings, draw=draws) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


async def test_a_demoted_carrier_still_heads_the_share_of_sends_that_explore(
    live: httpx.AsyncClient,
    server: RunningServer,
    peers: tuple[SmppPeer, SmppPeer],
    draws: GridDraws,
) -> None:
    first, _ = peers
    start_of_a_minute(server.clock)
    await first.command("configure", submit="status", status=ESME_RSUBMITFAIL)
    for _ in range(MIN_SAMPLE):
        # No figures yet: nothing is demoted, so no draw explores, whatever it is.
        assert await send(live, number()) == [
            ("first", "failed", "carrier_rejected"),
            ("second", "delivered", None),
        ]
    # `first` delivers again, but its last hour says 0 of 4: from the next minute it goes last.
    await first.command("configure", submit="accept", status=0, receipt=DELIVERED)

    start_of_a_minute(server.clock)
    before = len(draws.taken)
    routes = [await send(live, number()) for _ in range(8)]
    drawn = draws.taken[before:]
    assert len(drawn) == len(routes)  # one draw per send
    explored = [route for route, draw in zip(routes, drawn, strict=True) if draw < EXPLORE]
    kept = [route for route, draw in zip(routes, drawn, strict=True) if draw >= EXPLORE]
    assert explored == [[("first", "delivered", None)]] * 2
    assert kept == [[("second", "delivered", None)]] * 6

    # The explored sends are measured: the next minute's figures count them.
    start_of_a_minute(server.clock)
    assert await ratios(server) == {"first": 2 / 6, "second": 1.0}
