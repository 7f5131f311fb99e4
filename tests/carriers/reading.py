"""Reading Relay's answers in the carrier tests: attempts, events, settling, reports."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from relay.carriers.base import Carrier, DeliveryReport


async def settle(
    live: httpx.AsyncClient,
    path: str,
    done: Callable[[dict[str, Any]], bool],
    *,
    within: float = 10.0,
) -> dict[str, Any]:
    """Poll `path` until `done(body)`; the dispatch loop and receipts run in the server."""
    deadline = time.monotonic() + within
    while True:
        body: dict[str, Any] = (await live.get(path)).json()
        if done(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never settled: {body}")
        await asyncio.sleep(0.05)


def attempts(body: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(carrier, status, error code) of each attempt, oldest first."""
    return [
        (a["carrier"], a["status"], a["error"] and a["error"]["code"]) for a in body["attempts"]
    ]


async def event_types(live: httpx.AsyncClient, related: str) -> list[str]:
    response = await live.get("/v1/events", params={"related": related, "limit": 100})
    return [event["type"] for event in reversed(response.json()["data"])]


class Reports:
    """A report sink that keeps what a carrier passed on."""

    def __init__(self) -> None:
        self.reports: list[DeliveryReport] = []

    async def __call__(self, report: DeliveryReport) -> None:
        self.reports.append(report)


async def reports_of(carrier: Carrier) -> Reports:
    """A new sink, started as the one `carrier` passes its reports to."""
    sink = Reports()
    await carrier.start(sink)
    return sink
