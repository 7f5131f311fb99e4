"""The per-key request rate: a burst, then Retry-After; shared through Redis by every node."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.web.ratelimit import async_storage_uri, window_item
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


def _hammer(
    node: Served, key: str, until: float, tally: Counter[int], lock: threading.Lock
) -> None:
    with node.client(key) as client:
        while time.monotonic() < until:
            status = client.get("/v1/verifications", params={"limit": 1}).status_code
            with lock:
                tally[status] += 1


@pytest.mark.skipif(not _redis_is_up(), reason="needs Redis on 127.0.0.1:6379")
def test_two_relay_processes_share_one_budget_through_redis(
    tmp_path: Path, database_url: str
) -> None:
    account = create_account(test_settings(tmp_path / "cli", database_url))
    env = {
        "RELAY_RATE_LIMIT": "10",
        "RELAY_RATE_LIMIT_BURST": "10",
        "RELAY_RATE_LIMIT_STORAGE": "redis://127.0.0.1:6379/0",
    }
    with relay_servers(2, tmp_path, database_url, **env) as nodes:
        tally: Counter[int] = Counter()
        lock = threading.Lock()
        started = time.monotonic()
        until = started + 1.5
        threads = [
            threading.Thread(target=_hammer, args=(node, account.test_key, until, tally, lock))
            for node in nodes * 2
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    # 10 per moving second between both nodes; alone, each node would have let 10 through.
    assert set(tally) == {200, 429}
    assert 10 <= tally[200] <= 10 * (elapsed + 1)
    assert tally[429] > tally[200]
