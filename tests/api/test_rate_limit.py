"""The per-key request rate: a burst, then Retry-After; shared through Redis by every node."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.web.limit_storage import async_storage_uri
from relay.web.ratelimit import LocalMovingWindow, window_item
from tests.concurrency.relay_processes import Served, relay_servers
from tests.harness import RunningServer, ServerThread, create_account, test_settings

REDIS = ("127.0.0.1", 6379)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    settings = test_settings(
        tmp_path_factory.mktemp("limited"), database_url, rate_limit=5, rate_limit_burst=5
    )
    with ServerThread(settings) as running:
        yield running


def test_a_key_gets_its_burst_then_429_with_retry_after_then_more(limited: RunningServer) -> None:
    with limited.client(create_account(limited.settings).test_key) as api:
        answers = [api.get("/v1/verifications") for _ in range(6)]
        assert [r.status_code for r in answers] == [200] * 5 + [429]
        error = answers[-1].json()["error"]
        assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limited")
        wait = int(answers[-1].headers["retry-after"])
        assert wait == 1
        time.sleep(wait)  # the limiter runs on wall time: one second is the whole window
        assert api.get("/v1/verifications").status_code == 200


def test_the_budget_is_per_key(limited: RunningServer) -> None:
    with (
        limited.client(create_account(limited.settings).test_key) as busy,
        limited.client(create_account(limited.settings).test_key) as quiet,
    ):
        while busy.get("/v1/verifications").status_code != 429:
            pass
        assert quiet.get("/v1/verifications").status_code == 200


def test_unauthenticated_requests_get_401_not_429(limited: RunningServer) -> None:
    with limited.client(None) as anonymous:
        assert {anonymous.get("/v1/verifications").status_code for _ in range(8)} == {401}


def test_the_window_is_sized_like_a_token_bucket() -> None:
    default = window_item(100, 200)
    assert (default.amount, default.get_expiry()) == (200, 2)
    small = window_item(10, 10)
    assert (small.amount, small.get_expiry()) == (10, 1)
    assert async_storage_uri("redis://127.0.0.1:6379") == "async+redis://127.0.0.1:6379"
    assert async_storage_uri("memory://") == "async+memory://"


def _redis_is_up() -> bool:
    try:
        socket.create_connection(REDIS, timeout=1).close()
    except OSError:
        return False
    return True


def _hammer(node: Served, key: str, count: int, tally: Counter[int], lock: threading.Lock) -> None:
    with node.client(key) as client:
        for _ in range(count):
            status = client.get("/v1/verifications", params={"limit": 1}).status_code
            with lock:
                tally[status] += 1


@pytest.mark.skipif(not _redis_is_up(), reason="needs Redis on 127.0.0.1:6379")
def test_two_relay_processes_share_one_budget_through_redis(
    tmp_path: Path, database_url: str
) -> None:
    account = create_account(test_settings(tmp_path / "cli", database_url))
    # 10 requests in any 20 s: the outcome depends on request counts, not on how
    # fast a loaded machine sends them.
    env = {
        "RELAY_RATE_LIMIT": "0.5",
        "RELAY_RATE_LIMIT_BURST": "10",
        "RELAY_RATE_LIMIT_STORAGE": "redis://127.0.0.1:6379/0",
    }
    with relay_servers(2, tmp_path, database_url, **env) as nodes:
        tally: Counter[int] = Counter()
        lock = threading.Lock()
        started = time.monotonic()
        threads = [
            threading.Thread(target=_hammer, args=(node, account.test_key, 10, tally, lock))
            for node in nodes * 2
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    assert elapsed < 20, "the 40 requests must fit in one window for this test to mean anything"
    # Alone, each node would have let 10 through: 20 in all.
    assert tally == {200: 10, 429: 30}


def test_the_local_window_takes_the_burst_then_refuses_until_the_oldest_hit_slides_out() -> None:
    window = LocalMovingWindow(window_item(100, 200))  # 200 in any 2 s
    assert all(window.acquire("key_a", now=10.0 + i / 1000) is None for i in range(200))
    assert window.acquire("key_a", now=10.5) == 2  # the first hit leaves the window at 12.0
    assert window.acquire("key_b", now=10.5) is None  # another key has its own budget
    assert window.acquire("key_a", now=11.9) == 1
    assert window.acquire("key_a", now=12.0005) is None  # one slot freed, one taken
    assert window.acquire("key_a", now=12.0006) == 1
