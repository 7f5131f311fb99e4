"""One Idempotency-Key, twenty simultaneous POSTs, two Relay processes: one change.

Each request takes its key in the unit of its change, first among its writes, with its
answer. Every racer gets the first one's answer (replayed) or, while it is uncommitted,
409 `idempotency_key_in_use`; the change is made once: one SMS, one counted check.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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


def _race(nodes: list[Served], key: str, path: str, body: dict[str, Any]) -> list[httpx.Response]:
    barrier = threading.Barrier(RACERS)
    clients = [nodes[i % len(nodes)].client(key) for i in range(RACERS)]
    for client in clients:
        client.get("/healthz")  # connect and finish TLS first, so the POSTs really collide

    def one(client: httpx.Client) -> httpx.Response:
        barrier.wait()
        return client.post(path, json=body, headers={"Idempotency-Key": "race"})

    try:
        with ThreadPoolExecutor(RACERS) as pool:
            return list(pool.map(one, clients))
    finally:
        for client in clients:
            client.close()


def _one_answer(answers: list[httpx.Response]) -> httpx.Response:
    """Every 200 is the one answer (the first, or its replay); everyone else was told to
    wait. Returns it."""
    winners = [r for r in answers if r.status_code == 200]
    losers = [r for r in answers if r.status_code != 200]
    assert len({r.content for r in winners}) == 1, [r.text for r in winners]
    assert all(r.status_code == 409 for r in losers), [r.text for r in losers]
    assert {r.json()["error"]["code"] for r in losers} <= {"idempotency_key_in_use"}
    assert sum("idempotent-replayed" not in r.headers for r in winners) == 1
    return winners[0]


def test_twenty_simultaneous_creates_under_one_key_send_one_sms(
    tmp_path: Path, database_url: str
) -> None:
    settings = test_settings(tmp_path / "cli", database_url)
    account = create_account(settings, "Race")
    with relay_servers(2, tmp_path, database_url) as nodes:
        first = _one_answer(_race(nodes, account.test_key, "/v1/verifications", BODY))
        assert _sends_of(settings, account.id) == (1, 1)

        with nodes[1].client(account.test_key) as client:
            replay = client.post(
                "/v1/verifications", json=BODY, headers={"Idempotency-Key": "race"}
            )
    assert replay.status_code == 200
    assert replay.content == first.content
    assert replay.headers["idempotent-replayed"] == "true"
    assert _sends_of(settings, account.id) == (1, 1)


def test_twenty_simultaneous_checks_under_one_key_count_one_check(
    tmp_path: Path, database_url: str
) -> None:
    settings = test_settings(tmp_path / "cli", database_url)
    account = create_account(settings, "Race")
    with relay_servers(2, tmp_path, database_url) as nodes:
        with nodes[0].client(account.test_key) as client:
            created = client.post("/v1/verifications", json=BODY).json()
        body = {"id": created["id"], "code": "123456"}
        first = _one_answer(_race(nodes, account.test_key, "/v1/verifications/check", body))
        assert first.json()["remaining_checks"] == 4
        with nodes[1].client(account.test_key) as client:
            shown = client.get(f"/v1/verifications/{created['id']}").json()
    assert shown["remaining_checks"] == 4


def test_twenty_simultaneous_messages_under_one_key_send_one_sms(
    tmp_path: Path, database_url: str
) -> None:
    settings = test_settings(tmp_path / "cli", database_url)
    account = create_account(settings, "Race")
    body = {"to": "+14155550111", "code": "4321"}
    with relay_servers(2, tmp_path, database_url) as nodes:
        first = _one_answer(_race(nodes, account.test_key, "/v1/messages", body))
    assert first.json()["status"] == "delivered"
    messages = count_rows(
        settings,
        "SELECT count(*) AS n FROM messages WHERE account_id = :account",
        account=account.id,
    )
    attempts = count_rows(
        settings,
        "SELECT count(*) AS n FROM attempts JOIN messages m ON m.id = attempts.message_id"
        " WHERE m.account_id = :account",
        account=account.id,
    )
    assert (messages, attempts) == (1, 1)
