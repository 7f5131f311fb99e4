"""Fixtures of the fault tests: a webhook receiver and an SMSC, each a real peer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.carriers.smpp_peer import SmppPeer
from tests.faults.relay_process import DELIVERED
from tests.webhooks.receiver import Identity, Receiver, running_receiver


@pytest.fixture
def receiver(identity: Identity) -> Iterator[Receiver]:
    with running_receiver(identity) as running:
        yield running


@pytest_asyncio.fixture
async def smsc(peer_dir: Path) -> AsyncIterator[SmppPeer]:
    peer = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    try:
        yield peer
    finally:
        await peer.stop()
