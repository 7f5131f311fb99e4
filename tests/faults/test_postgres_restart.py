"""PostgreSQL stopped and started again under traffic: Relay answers 503 `api_error`
naming the database meanwhile, `/readyz` says it is not ready, and everything comes
back by itself once the server is up: requests, and the delivery of every event's
webhook; what was written before is still there.

The server is a private one (tests/faults/private_postgres.py), really stopped
with `pg_ctl stop -m fast` and started again on the same port.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from relay.db.driver import open_db
from relay.db.migrate import upgrade
from relay.db.sql import Sql, Tx
from tests.faults.private_postgres import PrivatePostgres, private_postgres
from tests.faults.relay_process import RelayProcess, eventually
from tests.webhooks.receiver import Identity, Receiver

DOWN_FOR = 3.0


@dataclass
class Seen:
    phase: str = "before"
    answers: list[tuple[str, int, dict[str, object]]] = field(default_factory=list)
    made: list[str] = field(default_factory=list)
    stop: bool = False

    def statuses(self, phase: str) -> Counter[int]:
        return Counter(status for p, status, _ in self.answers if p == phase)


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        upgrade(server.url)
        yield server


@pytest.fixture
def relay(tmp_path: Path, postgres: PrivatePostgres, identity: Identity) -> Iterator[RelayProcess]:
    process = RelayProcess(
        tmp_path,
        postgres.url,
        RELAY_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        RELAY_WEBHOOK_CA_BUNDLE=str(identity.ca_path),
        RELAY_WEBHOOK_RETRY_SCHEDULE="0.2,0.5,1,2",
    )
    try:
        yield process
    finally:
        process.stop()


async def undelivered(url: str) -> int:
    db = open_db(url)

    async def count(tx: Tx) -> int:
        row = await tx.fetchrow(
            Sql("SELECT count(*) AS n FROM events WHERE delivery_status <> 'delivered'")
        )
        return -1 if row is None else int(row["n"])

    try:
        return await db.read(count)
    finally:
        await db.close()


async def traffic(client: httpx.AsyncClient, seen: Seen, hook: str) -> None:
    """One create, then its check, over and over, each answer noted with its phase."""
    n = 0
    while not seen.stop:
        n += 1
        phase = seen.phase
        made = await client.post(
            "/v1/verifications", json={"to": f"+1415555{n % 10000:04d}", "webhook_url": hook}
        )
        seen.answers.append((phase, made.status_code, made.json()))
        if made.status_code == 200:
            seen.made.append(made.json()["id"])
            body = {"id": made.json()["id"], "code": "000000"}
            checked = await client.post("/v1/verifications/check", json=body)
            seen.answers.append((phase, checked.status_code, checked.json()))
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_postgres_restarted_under_traffic_gets_503_meanwhile_and_resumes_by_itself(
    relay: RelayProcess, postgres: PrivatePostgres, receiver: Receiver
) -> None:
    key = (await asyncio.to_thread(relay.account))["test_key"]
    await asyncio.to_thread(relay.start)
    seen = Seen()
    async with relay.client(key) as client, relay.client(None) as anonymous:
        running = asyncio.ensure_future(traffic(client, seen, receiver.url("/ok")))
        await eventually(lambda: len(seen.made) >= 5, within=10, what="traffic before")

        await asyncio.to_thread(postgres.stop)
        seen.phase = "down"
        down_since = time.monotonic()
        await eventually(
            lambda: seen.statuses("down")[503] >= 3,
            within=10,
            what=f"503 answers; got {seen.answers[-3:]}\n{relay.output()[-3000:]}",
        )
        ready_down = await anonymous.get("/readyz")
        await asyncio.sleep(max(0.0, DOWN_FOR - (time.monotonic() - down_since)))

        await asyncio.to_thread(postgres.start)
        seen.phase = "after"
        back = time.monotonic()
        await eventually(
            lambda: seen.statuses("after")[200] >= 6, within=20, what="traffic after the restart"
        )
        resumed_in = time.monotonic() - back
        ready_after = await anonymous.get("/readyz")
        seen.stop = True
        await running
        kept = [await client.get(f"/v1/verifications/{vid}") for vid in seen.made]

    async def all_delivered() -> bool:
        # Events written before and after the outage, and those whose delivery it cut.
        return await undelivered(postgres.url) == 0

    await eventually(all_delivered, within=20, what="every event delivered", every=0.3)

    print(f"statuses while down {dict(seen.statuses('down'))}, resumed in {resumed_in:.2f} s")
    everything = Counter(status for _, status, _ in seen.answers)
    assert set(everything) <= {200, 503}, (everything, relay.output())
    refusals = [body for _, status, body in seen.answers if status == 503]
    for body in refusals:
        error = body["error"]
        assert isinstance(error, dict)
        assert error["type"] == "api_error", body
        assert "database" in str(error["message"]).lower(), body
    assert ready_down.status_code == 503, ready_down.text
    assert "database" in ready_down.text
    assert ready_after.status_code == 200, ready_after.text
    assert [r.status_code for r in kept] == [200] * len(kept)
    # No request met an unhandled error (background loops log their failed rounds and go on).
    assert "http.unhandled" not in relay.whole_log()
    assert "http.database_unavailable" in relay.whole_log()
