"""One receiver that hangs holds its own endpoint's slots, never the others'."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from relay.config import Settings
from relay.db.sql import Sql
from relay.events.claims import Capacity
from relay.events.delivery import DeliveryWorker
from relay.services import Services, build_services
from relay.webhooks import verify
from relay.webhooks.guard import endpoint
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    isolated_database,
    record_events,
    running_receiver,
    webhook_settings,
)

TOTAL = 4
PER_ENDPOINT = 2


@pytest.fixture
def stuck(identity: Identity) -> Iterator[Receiver]:
    with running_receiver(identity) as running:
        yield running


@pytest.fixture
def healthy(identity: Identity) -> Iterator[Receiver]:
    with running_receiver(identity) as running:
        yield running


@pytest.fixture
def settings(tmp_path: Path, database_url: str, identity: Identity) -> Settings:
    url = isolated_database(database_url, "endpoints", tmp_path)
    # A deadline far beyond the test: a delivery that waits for a hanging
    # attempt to give up waits for the whole test and fails it.
    return webhook_settings(tmp_path, url, identity, webhook_timeout=60)


@pytest.fixture
async def services(settings: Settings) -> AsyncIterator[Services]:
    services = build_services(settings)
    try:
        yield services
    finally:
        await services.close()


async def arrived(receiver: Receiver, event_ids: list[str]) -> None:
    # A failure bound, not a measurement: the hanging attempts' deadline is longer.
    deadline = time.monotonic() + 30
    while not set(event_ids) <= set(receiver.answered):
        assert time.monotonic() < deadline, "the healthy receiver's events did not all arrive"
        await asyncio.sleep(0.02)


async def test_a_hanging_receiver_holds_only_its_endpoints_slots_while_another_gets_every_event(
    services: Services, stuck: Receiver, healthy: Receiver
) -> None:
    # Written first, so they are due first and the first claim meets them.
    _, hanging_ids = await record_events(services, stuck.url("/hang"), 10)
    secret, healthy_ids = await record_events(services, healthy.url("/ok"), 10)
    worker = DeliveryWorker(services.events, concurrency=TOTAL, endpoint_concurrency=PER_ENDPOINT)
    loop = asyncio.create_task(worker.run())
    try:
        await arrived(healthy, healthy_ids)
        stuck_now = stuck.requests("/hang")
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        stuck.released.set()

    assert len(stuck_now) == PER_ENDPOINT  # still hanging, and no more of them sent
    assert {r.event_id for r in stuck_now} <= set(hanging_ids)
    assert not stuck.answered
    for request in healthy.requests("/ok"):
        verify(request.body, request.signature, secret)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://hooks.example/relay?token=1", "https://hooks.example"),
        ("https://hooks.example:8443/a/b", "https://hooks.example:8443"),
        ("https://hooks.example?token=1", "https://hooks.example"),
        ("https://hooks.example", "https://hooks.example"),
        ("https://[2001:db8::1]:8443/x", "https://[2001:db8::1]:8443"),
    ],
)
def test_an_endpoint_is_the_url_before_its_path_query_or_fragment(url: str, expected: str) -> None:
    assert endpoint(url) == expected


async def test_a_full_endpoint_is_skipped_by_the_claim_but_a_longer_host_it_prefixes_is_not(
    services: Services,
) -> None:
    _, full = await record_events(services, "https://a.example/hook", 2)
    _, also_full = await record_events(services, "https://a.example?via=query", 1)
    _, other = await record_events(services, "https://a.example.org/hook", 2)
    capacity = Capacity(total=8, per_endpoint=2, busy_endpoints={"https://a.example": 2})

    batch = await services.events.ledger.claim(owner="w", capacity=capacity)

    assert sorted(c.event_id for c in batch.claims) == sorted(other)
    assert not {c.event_id for c in batch.claims} & {*full, *also_full}


async def test_a_claim_takes_no_more_from_one_endpoint_than_its_free_slots(
    services: Services,
) -> None:
    await record_events(services, "https://a.example/hook", 5)
    capacity = Capacity(total=8, per_endpoint=3, busy_endpoints={"https://a.example": 1})

    batch = await services.events.ledger.claim(owner="w", capacity=capacity)

    assert len(batch.claims) == 2
    assert batch.waiting == {"https://a.example"}


async def test_a_healthy_endpoints_events_are_claimed_while_another_is_full_with_a_backlog(
    services: Services,
) -> None:
    _, backlog = await record_events(services, "https://full.example/hook", 2000)
    _, healthy = await record_events(services, "https://healthy.example/hook", 3)
    capacity = Capacity(total=8, per_endpoint=2, busy_endpoints={"https://full.example": 2})

    batch = await services.events.ledger.claim(owner="w", capacity=capacity)

    assert sorted(c.event_id for c in batch.claims) == sorted(healthy[:2])
    # Both wait for slots: the loop looks again as soon as either has room.
    assert batch.waiting == {"https://full.example", "https://healthy.example"}
    freed = Capacity(total=8, per_endpoint=2, busy_endpoints={"https://healthy.example": 2})
    after = await services.events.ledger.claim(owner="w", capacity=freed)
    assert [c.event_id for c in after.claims] == backlog[:2]  # oldest first


async def test_an_endpoint_that_waited_longest_is_served_first_when_the_total_runs_out(
    services: Services,
) -> None:
    _, first = await record_events(services, "https://early.example/hook", 3)
    await record_events(services, "https://late.example/hook", 3)
    capacity = Capacity(total=2, per_endpoint=2)

    batch = await services.events.ledger.claim(owner="w", capacity=capacity)

    assert [c.event_id for c in batch.claims] == first[:2]
    assert batch.waiting == {"https://early.example", "https://late.example"}


_WITHOUT_ENDPOINT = Sql("UPDATE events SET endpoint = NULL WHERE webhook_url = :url")
_USED_UP = Sql(
    "UPDATE events SET attempt_count = 4, lease_until = :past, lease_owner = 'dead'"
    " WHERE id IN (SELECT value FROM json_each(:ids))",
    postgres="UPDATE events SET attempt_count = 4, lease_until = :past, lease_owner = 'dead'"
    " WHERE id IN (SELECT json_array_elements_text(CAST(:ids AS json)))",
)


async def test_an_event_written_without_its_endpoint_by_an_older_process_is_still_claimed(
    services: Services,
) -> None:
    """A process from before migration 0010, during a rolling upgrade, writes no endpoint."""
    _, ids = await record_events(services, "https://old.example/hook?t=1", 2)
    await services.db.write(
        lambda tx: tx.execute(_WITHOUT_ENDPOINT, {"url": "https://old.example/hook?t=1"})
    )

    batch = await services.events.ledger.claim(owner="w", capacity=Capacity(8, 8))

    assert sorted(c.event_id for c in batch.claims) == sorted(ids)


async def test_deliveries_with_their_attempts_used_up_are_dropped_without_taking_a_slot(
    services: Services,
) -> None:
    _, ids = await record_events(services, "https://a.example/hook", 5)
    past = datetime.now(UTC) - timedelta(minutes=1)
    await services.db.write(lambda tx: tx.execute(_USED_UP, {"ids": ids[:3], "past": past}))

    batch = await services.events.ledger.claim(owner="w", capacity=Capacity(8, 2))

    assert [c.event_id for c in batch.claims] == ids[3:]
    statuses = await services.events.db.read(
        lambda tx: tx.fetch(Sql("SELECT delivery_status FROM events ORDER BY id"))
    )
    assert [r["delivery_status"] for r in statuses] == ["dropped"] * 3 + ["pending"] * 2
