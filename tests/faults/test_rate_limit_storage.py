"""`relay serve` counting its limits in a Redis of the test's own, which is killed: the
limits are counted in the process meanwhile (the same rule), nothing answers 500, the
log says so once, `/readyz` names it and stays 200, and Redis back is used again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.serving import Serving, relay_serve
from tests.faults.private_redis import PrivateRedis

BURST = 20
FAILURES = 5


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def serving(tmp_path: Path, database_url: str, redis: PrivateRedis) -> Iterator[Serving]:
    with relay_serve(
        tmp_path,
        database_url,
        RELAY_RATE_LIMIT_STORAGE=redis.url,
        RELAY_RATE_LIMIT="0.1",  # BURST in any 200 s
        RELAY_RATE_LIMIT_BURST=str(BURST),
        RELAY_AUTH_FAILURE_RATE="0.05",
        RELAY_AUTH_FAILURE_BURST=str(FAILURES),
    ) as running:
        yield running


def storage_state(serving: Serving) -> str:
    with serving.client() as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    state: str = ready.json()["checks"]["rate_limit_storage"]
    return state


def sign_in(serving: Serving, secret: str) -> int:
    with serving.client() as browser:
        browser.headers["Origin"] = serving.base_url
        return browser.post("/console/sign-in", data={"secret": secret}).status_code


def test_redis_stopped_answers_from_a_fallback_window_not_500(
    serving: Serving, redis: PrivateRedis
) -> None:
    key = serving.account["test_key"]
    with serving.client(key) as api:
        assert api.get("/v1/verifications").status_code == 200
    assert redis.keys() > 0  # counted in Redis

    redis.kill()
    with serving.client(key) as api:
        statuses = [api.get("/v1/verifications").status_code for _ in range(BURST + 5)]
    # The same rule, counted in this process from the outage on.
    assert statuses == [200] * BURST + [429] * 5
    with serving.client("sk_test_" + "w" * 32) as guesser:
        guesses = [guesser.get("/v1/verifications").status_code for _ in range(FAILURES + 1)]
    assert guesses == [401] * FAILURES + [429]
    assert sign_in(serving, serving.account["live_key"]) == 303
    assert sign_in(serving, "not-a-key") == 401

    log = serving.stderr.read_text()
    assert "Traceback" not in log
    assert "http.unhandled" not in log
    assert "Retry attempt" not in log  # the Redis client's own line per retried command
    assert log.count("rate_limit.storage_unavailable") == 1, log


def test_readyz_reports_the_rate_limit_storage(serving: Serving, redis: PrivateRedis) -> None:
    assert storage_state(serving) == "ok"
    redis.kill()
    # Reported, not failed: every process shares the store, and each still limits.
    assert storage_state(serving).startswith("unavailable")
    key = serving.account["test_key"]
    with serving.client(key) as api:
        assert api.get("/v1/verifications").status_code == 200

    redis.start()
    deadline = time.monotonic() + 15
    while storage_state(serving) != "ok":
        assert time.monotonic() < deadline, "the storage never came back"
        time.sleep(0.2)
    # The same process counts in Redis again, without a restart.
    assert redis.keys() == 0
    deadline = time.monotonic() + 15
    while redis.keys() == 0:
        assert time.monotonic() < deadline, "requests are not counted in Redis again"
        with serving.client(key) as api:
            assert api.get("/v1/verifications").status_code == 200
        time.sleep(0.2)
    log = serving.stderr.read_text()
    assert "Traceback" not in log
    assert log.count("rate_limit.storage_unavailable") == 1, log
    assert log.count("rate_limit.storage_available") == 1, log
