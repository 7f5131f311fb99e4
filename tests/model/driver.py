"""The real Relay app in this process, on a clock that moves only when told to.

Each request goes through every middleware and the router (httpx over ASGI), so
what the state machine sees is what a client over HTTPS would see, minus TLS.
The clock is frozen between steps: the reference model knows the exact time of
every request, and no boundary (30 s between sends, a TTL) is crossed by the
wall clock moving on while the test runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from relay.accounts.models import NewAccount
from relay.services import Services, build_services
from relay.web.app import create_app
from relay.worker.sweeper import sweep_once
from tests.harness import test_settings

# A year ahead: nothing in the suite that runs on the real clock sees these rows as due.
START = timedelta(days=365)


class ManualClock:
    def __init__(self) -> None:
        self.moment = datetime.now(UTC).replace(microsecond=0) + START

    def now(self) -> datetime:
        return self.moment

    def advance(self, seconds: int) -> None:
        self.moment += timedelta(seconds=seconds)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    content: bytes

    def json(self) -> Any:
        return httpx.Response(self.status, content=self.content).json()

    @property
    def error_code(self) -> str | None:
        if self.status < 400:
            return None
        code: str = self.json()["error"]["code"]
        return code


class Relay:
    """One app, one database, one event loop for the whole test; one account per example."""

    def __init__(self, data_dir: Path, database_url: str) -> None:
        self.clock = ManualClock()
        # Pumping blocks and per-key rate limits judge traffic across examples and by
        # wall time; the lifecycle is what is modelled here, so they are out of the way.
        settings = test_settings(
            data_dir,
            database_url,
            pumping_guard="off",
            rate_limit=1_000_000,
            rate_limit_burst=1_000_000,
        )
        self.loop = asyncio.new_event_loop()
        self.services: Services = build_services(settings, clock=self.clock)
        self.app = create_app(self.services, background=False)
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="https://relay.test"
        )
        self.loop.run_until_complete(self.services.delivery.start(dispatch=True))
        self.key = ""

    def new_account(self) -> NewAccount:
        account = self.loop.run_until_complete(self.services.accounts.create_account("Acme"))
        self.key = account.test_key
        return account

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Answer:
        headers = {"Authorization": f"Bearer {self.key}"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        content = None
        if body is not None:
            # The bytes the model fingerprints: the same body is the same bytes.
            content = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        response = self.loop.run_until_complete(
            self.client.request(method, path, content=content, headers=headers, params=params)
        )
        return Answer(response.status_code, response.headers, response.content)

    def sweep(self) -> int:
        return self.loop.run_until_complete(sweep_once(self.services))

    def close(self) -> None:
        async def shut() -> None:
            await self.client.aclose()
            await self.services.delivery.drain(grace=1)
            await self.services.close()

        self.loop.run_until_complete(shut())
        self.loop.close()


@contextlib.contextmanager
def running_relay(data_dir: Path, database_url: str) -> Iterator[Relay]:
    relay = Relay(data_dir, database_url)
    try:
        yield relay
    finally:
        relay.close()
