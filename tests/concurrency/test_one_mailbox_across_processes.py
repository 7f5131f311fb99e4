"""Creates racing from real parallel processes to spellings of one mailbox open one
pending verification between them: the unique index on the destination holds it."""

from __future__ import annotations

import asyncio
import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from relay.config import Settings
from relay.errors import RelayError
from relay.services import build_services
from relay.verifications.service import CreateRequest
from tests.harness import count_rows, create_account, test_settings
from tests.webhooks.receiver import isolated_database

SPELLINGS = ["race@mailbox.example", "RACE@mailbox.example", "race+a@mailbox.example"]
PROCESSES = 6
ROUNDS = 3


def _create_many(settings: Settings, key: str, to: str, barrier: Barrier) -> list[str]:
    async def go() -> list[str]:
        services = build_services(settings)
        outcomes: list[str] = []
        try:
            caller = await services.accounts.authenticate(key)
            request = CreateRequest(
                to=to,
                channels=("email",),
                locale="en",
                code_length=6,
                ttl=600,
                metadata={},
                webhook_url=None,
            )
            for _ in range(ROUNDS):
                barrier.wait()
                try:
                    outcomes.append((await services.verifications.create(caller, request)).id)
                except RelayError as error:
                    outcomes.append(f"error:{error.code}")
        finally:
            await services.close()
        return outcomes

    return asyncio.run(go())


def _worker(queue: Any, *args: Any) -> None:
    queue.put(_create_many(*args))


def test_spellings_of_one_mailbox_created_at_once_share_one_pending_verification(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "one_mailbox_race", tmp_path)
    # Every create may resend at once: only the one pending verification is under test.
    settings = test_settings(tmp_path, url, resend_interval=0, max_sends=20)
    account = create_account(settings, "Race")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    barrier = ctx.Barrier(PROCESSES)
    workers = [
        ctx.Process(
            target=_worker,
            args=(queue, settings, account.test_key, SPELLINGS[i % len(SPELLINGS)], barrier),
        )
        for i in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes: list[str] = []
    for _ in workers:
        outcomes += queue.get(timeout=180)
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0

    opened = {outcome for outcome in outcomes if outcome.startswith("ver_")}
    # A resend that lost its race to another is refused; nothing else is.
    assert set(outcomes) - opened <= {"error:resend_too_soon"}, outcomes
    assert len(opened) == 1, outcomes
    stored = count_rows(
        settings,
        "SELECT count(*) AS n FROM verifications WHERE account_id = :account",
        account=account.id,
    )
    assert stored == 1
