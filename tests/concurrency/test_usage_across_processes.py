"""Usage counters stay exact when parallel processes count into the same row.

Eight processes, released together by a barrier, each count their share of
one message's attempts into the same account, day, country and carrier, one
transaction per attempt as `Recorder` does. Accepted attempts bill 1 to 4
segments; refused ones bill nothing. Every count and every segment must be
in the rows: the counter is one upsert that reads the attempt's segments
itself, so there is no read-then-write to lose.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path

from relay.config import Settings
from relay.db.driver import open_db
from relay.delivery import store, usage
from relay.delivery.attempts import AttemptStatus
from relay.delivery.owners import OwnerRef
from relay.delivery.store import NewAttempt
from relay.messages.service import SendRequest
from relay.services import build_services
from tests.harness import run, test_settings
from tests.webhooks.receiver import isolated_database

PROCESSES = 8
EACH = 25
# Not today: the live send's own attempt is never counted into these rows.
DAY = "2026-01-02"
NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


def _count_all(
    barrier: Barrier, settings: Settings, account_id: str, counts: list[tuple[str, str]]
) -> None:
    async def go() -> None:
        db = open_db(settings.resolved_database_url)
        try:
            await db.read(lambda tx: usage.usage_totals(tx, account_id=account_id))  # connected
            barrier.wait()
            for attempt_id, outcome in counts:
                await db.write(
                    lambda tx, a=attempt_id, o=outcome: usage.count(
                        tx,
                        attempt_id=a,
                        account_id=account_id,
                        day=DAY,
                        country="US",
                        carrier="live-a",
                        outcome=o,
                    )
                )
        finally:
            await db.close()

    asyncio.run(go())


def _live_message(settings: Settings) -> tuple[str, str]:
    """(account id, message id): a live send, for attempts to belong to."""

    async def go() -> tuple[str, str]:
        services = build_services(settings)
        try:
            account = await services.accounts.create_account("Race")
            caller = await services.accounts.authenticate(account.live_key)
            request = SendRequest(
                to="+14155550123", code="123456", locale="en", metadata={}, webhook_url=None
            )
            return account.id, (await services.messages.send(caller, request)).id
        finally:
            await services.close()

    return run(go())


def _attempts(settings: Settings, message_id: str) -> list[list[tuple[str, str, int | None]]]:
    """Each process's attempts: (id, outcome, billed segments), written beforehand."""
    shares: list[list[tuple[str, str, int | None]]] = []
    new: list[NewAttempt] = []
    for process in range(PROCESSES):
        share = []
        for index in range(EACH):
            refused = index % 5 == 0
            segments = None if refused else 1 + (process + index) % 4
            row = store.queued(OwnerRef("message", message_id), ("live-a",), 0)
            status = AttemptStatus.FAILED if refused else AttemptStatus.DELIVERED
            new.append(NewAttempt(dataclasses.replace(row, status=status), segments=segments))
            share.append((row.id, "carrier_rejected" if refused else "delivered", segments))
        shares.append(share)

    async def go() -> None:
        db = open_db(settings.resolved_database_url)
        try:
            await db.write(lambda tx: store.insert(tx, new, now=NOW))
        finally:
            await db.close()

    run(go())
    return shares


def _rows(settings: Settings, account_id: str) -> dict[str, tuple[int, int]]:
    async def go() -> dict[str, tuple[int, int]]:
        db = open_db(settings.resolved_database_url)
        try:
            rows = await db.read(lambda tx: usage.usage_rows(tx, account_id=account_id, since=DAY))
        finally:
            await db.close()
        return {r.outcome: (r.count, r.segments) for r in rows if r.day == DAY}

    return run(go())


def test_eight_processes_counting_into_one_row_lose_no_send_and_no_segment(
    tmp_path: Path, database_url: str
) -> None:
    # A database of its own: a dispatcher of another test's server must not take the
    # queued attempt of the live send below.
    url = isolated_database(database_url, "usage_processes", tmp_path)
    settings = test_settings(
        tmp_path,
        url,
        carriers={"live-a": {"kind": "sandbox"}},
        routes={"default": ["live-a"]},
    )
    account_id, message_id = _live_message(settings)
    shares = _attempts(settings, message_id)

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    workers = [
        ctx.Process(
            target=_count_all,
            args=(barrier, settings, account_id, [(a, o) for a, o, _ in share]),
        )
        for share in shares
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0

    every = [attempt for share in shares for attempt in share]
    delivered = [s for _, outcome, s in every if outcome == "delivered"]
    refused = [a for a in every if a[1] == "carrier_rejected"]
    assert _rows(settings, account_id) == {
        "delivered": (len(delivered), sum(s or 0 for s in delivered)),
        "carrier_rejected": (len(refused), 0),
    }
