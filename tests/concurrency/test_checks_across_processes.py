"""Counters and state changes hold under real parallel processes on one database."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections import Counter
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from relay.config import Settings
from relay.errors import RelayError
from relay.services import build_services
from relay.verifications.service import CreateRequest
from tests.harness import count_rows, create_account, run, test_settings


def _check_many(
    settings: Settings, key: str, verification_id: str, code: str, times: int, barrier: Barrier
) -> list[str]:
    async def go() -> list[str]:
        services = build_services(settings)
        outcomes: list[str] = []
        try:
            caller = await services.accounts.authenticate(key)
            barrier.wait()
            for _ in range(times):
                try:
                    result = await services.verifications.check(
                        caller, code=code, verification_id=verification_id
                    )
                    outcomes.append(result.status.value)
                except RelayError as error:
                    outcomes.append(f"error:{error.code}")
        finally:
            await services.close()
        return outcomes

    return asyncio.run(go())


def _worker(queue: Any, *args: Any) -> None:
    queue.put(_check_many(*args))


def _race(
    settings: Settings, key: str, verification_id: str, code: str, processes: int, times: int
) -> Counter[str]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    barrier = ctx.Barrier(processes)
    workers = [
        ctx.Process(
            target=_worker, args=(queue, settings, key, verification_id, code, times, barrier)
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    outcomes: Counter[str] = Counter()
    for _ in workers:
        outcomes.update(queue.get(timeout=120))
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return outcomes


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return test_settings(tmp_path, database_url)


@pytest.fixture
def owner(settings: Settings) -> NewAccount:
    return create_account(settings, "Race")


def _open_verification(settings: Settings, key: str) -> str:
    async def go() -> str:
        services = build_services(settings)
        try:
            caller = await services.accounts.authenticate(key)
            request = CreateRequest(
                to="+14155552671",
                locale="en",
                code_length=6,
                ttl=600,
                metadata={},
                webhook_url=None,
            )
            return (await services.verifications.create(caller, request)).id
        finally:
            await services.close()

    return run(go())


def _events_of(settings: Settings, verification_id: str, kind: str) -> int:
    return count_rows(
        settings,
        "SELECT count(*) AS n FROM events WHERE related_id = :related AND type = :kind",
        related=verification_id,
        kind=kind,
    )


def _status_of(settings: Settings, key: str, verification_id: str) -> tuple[str, int]:
    async def go() -> tuple[str, int]:
        services = build_services(settings)
        try:
            caller = await services.accounts.authenticate(key)
            found = await services.verifications.retrieve(caller, verification_id)
            return found.status.value, found.checks
        finally:
            await services.close()

    return run(go())


def test_eight_processes_of_wrong_checks_count_exactly_five(
    settings: Settings, owner: NewAccount
) -> None:
    verification_id = _open_verification(settings, owner.test_key)
    outcomes = _race(settings, owner.test_key, verification_id, "111111", processes=8, times=20)
    assert outcomes == Counter(
        {"pending": 4, "max_attempts_reached": 1, "error:max_attempts_reached": 155}
    )
    assert _status_of(settings, owner.test_key, verification_id) == ("max_attempts_reached", 5)
    assert _events_of(settings, verification_id, "verification.max_attempts_reached") == 1
    # Each counted wrong code, and only those, went to the number's counter.
    failed = count_rows(
        settings,
        "SELECT COALESCE(SUM(failed_checks), 0) AS n FROM abuse_counters"
        " WHERE account_id = :account AND kind = 'number' AND subject = :number",
        account=owner.id,
        number="+14155552671",
    )
    assert failed == 5


def test_sixteen_concurrent_correct_checks_approve_once(
    settings: Settings, owner: NewAccount
) -> None:
    verification_id = _open_verification(settings, owner.test_key)
    outcomes = _race(settings, owner.test_key, verification_id, "000000", processes=16, times=1)
    assert outcomes == Counter({"approved": 1, "error:verification_approved": 15})
    assert _status_of(settings, owner.test_key, verification_id) == ("approved", 1)
    assert _events_of(settings, verification_id, "verification.approved") == 1
