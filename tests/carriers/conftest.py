"""Fixtures of the SMPP carrier's tests: a scripted node-smpp SMSC and carriers bound to it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from relay.carriers.base import (
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
