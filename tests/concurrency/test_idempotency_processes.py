"""One Idempotency-Key, twenty simultaneous creates, two Relay processes: one SMS."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from relay.config import Settings
from tests.concurrency.relay_processes import Served, relay_servers
from tests.harness import count_rows, create_account, test_settings

RACERS = 20
BODY = {"to": "+14155550100"}


def _sends_of(settings: Settings, account_id: str) -> tuple[int, int]:
    """(verifications, attempts) of the account: every attempt is one SMS handed to a carrier."""

    opened = count_rows(
        settings,
        "SELECT count(*) AS n FROM verifications WHERE account_id = :account",
        account=account_id,
    )
    sent = count_rows(
        settings,
        "SELECT count(*) AS n FROM attempts JOIN verifications v ON v.id = attempts.verification_id"
        " WHERE v.account_id = :account",
        account=account_id,
    )
    return opened, sent


def _race(nodes: list[Served], key: str) -> list[httpx.Response]:
    barrier = threading.Barrier(RACERS)
    clients = [nodes[i % len(nodes)].client(key) for i in range(RACERS)]
    for client in clients:
        client.get("/healthz")  # connect and finish TLS first, so the POSTs really collide

    def one(client: httpx.Client) -> httpx.Response:
        barrier.wait()
        return client.post("/v1/verifications", json=BODY, headers={"Idempotency-Key": "race"})

    try:
        with ThreadPoolExecutor(RACERS) as pool:
            return list(pool.map(one, clients))
    finally:
        for client in clients:
            client.close()


def test_twenty_simultaneous_creates_under_one_key_send_one_sms(
    tmp_path: Path, database_url: str
) -> None:
    settings = test_settings(tmp_path / "cli", database_url)
    account = create_account(settings, "Race")
    with relay_servers(2, tmp_path, database_url) as nodes:
        answers = _race(nodes, account.test_key)
        winners = [r for r in answers if r.status_code == 200]
        losers = [r for r in answers if r.status_code != 200]
        # Every 200 is the one answer (the first, or its replay); everyone else was told to wait.
        assert len({r.content for r in winners}) == 1
        assert all(r.status_code == 409 for r in losers)
        assert {r.json()["error"]["code"] for r in losers} <= {"idempotency_key_in_use"}
        assert _sends_of(settings, account.id) == (1, 1)

        with nodes[1].client(account.test_key) as client:
            replay = client.post(
                "/v1/verifications", json=BODY, headers={"Idempotency-Key": "race"}
            )
    assert replay.status_code == 200
    assert replay.content == winners[0].content
    assert replay.headers["idempotent-replayed"] == "true"
    assert _sends_of(settings, account.id) == (1, 1)
