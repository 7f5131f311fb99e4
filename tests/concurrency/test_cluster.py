"""Four API processes and two workers on one PostgreSQL keep every invariant.

`relay serve --workers 4` answers the API and leaves all background work to two
`relay worker` processes (RELAY_SERVE_BACKGROUND=false). Clients open a new
connection per request, so requests land on all four API processes. A real
SMSC (node-smpp) counts the SMS; a TLS receiver counts the webhooks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.db.urls import is_postgres
from tests.carriers.smpp_peer import SmppPeer
from tests.harness import TEST_CODE_KEY, free_port
from tests.webhooks.receiver import isolated_database, running_receiver, write_identity

PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL", "")
pytestmark = [
    pytest.mark.skipif(
        not (PG_URL and is_postgres(PG_URL)), reason="several processes need PostgreSQL"
    ),
    pytest.mark.asyncio,
]

RELAY = [sys.executable, "-m", "relay.cli.main"]
NUMBERS = 24
RACERS = 16


@contextmanager
def cluster(tmp: Path, env: dict[str, str]) -> Iterator[str]:
    """`relay serve --workers 4` plus two `relay worker`; yields the API's base URL."""
    port = free_port()
    processes = [
        subprocess.Popen(
            [*RELAY, "serve", "--workers", "4", "--port", str(port)],
            env={**env, "RELAY_DATA_DIR": str(tmp / "api")},
            stdout=subprocess.DEVNULL,
            stderr=(tmp / "serve.log").open("wb"),
        ),
        *(
            subprocess.Popen(
                [*RELAY, "worker"],
                env={**env, "RELAY_DATA_DIR": str(tmp / f"worker-{i}")},
                stdout=subprocess.DEVNULL,
                stderr=(tmp / f"worker-{i}.log").open("wb"),
            )
            for i in range(2)
        ),
    ]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def client(base_url: str, cert: Path, key: str) -> httpx.Client:
    context = ssl.create_default_context(cafile=os.fspath(cert))
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base_url, verify=context, headers=headers, timeout=60)


def wait_ready(base_url: str, cert: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if cert.exists():
            try:
                with client(base_url, cert, "") as probe:
                    if probe.get("/healthz").status_code == 200:
                        return
            except (httpx.TransportError, ssl.SSLError):
                pass
        time.sleep(0.2)
    raise AssertionError("relay serve --workers 4 did not start")


def race(count: int, call: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    """`count` calls released together, each on its own connection."""
    barrier = threading.Barrier(count)

    def one(index: int) -> httpx.Response:
        barrier.wait()
        return call(index)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def poll(condition: Callable[[], bool], what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


async def test_four_api_processes_and_two_workers_keep_every_invariant(
    tmp_path: Path, database_url: str, peer_dir: Path
) -> None:
    url = await asyncio.to_thread(isolated_database, database_url, "cluster", tmp_path)
    (tmp_path / "pki").mkdir()
    identity = write_identity(tmp_path / "pki")
    peer = await SmppPeer.start(peer_dir, receipt={"stat": "DELIVRD", "form": "tlv"})
    config = tmp_path / "relay.toml"
    config.write_text(
        f'[carriers.smsc]\nkind = "smpp"\nhost = "127.0.0.1"\nport = {peer.port}\n'
        'system_id = "relay"\npassword = "secret"\n[routes]\ndefault = ["smsc"]\n'
    )
    env = {
        **os.environ,
        "RELAY_DATABASE_URL": url,
        "RELAY_CONFIG": str(config),
        "RELAY_CODE_KEY": TEST_CODE_KEY,
        "RELAY_SERVE_BACKGROUND": "false",
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_CA_BUNDLE": str(identity.ca_path),
        "RELAY_WEBHOOK_RETRY_SCHEDULE": "0.2,0.5,1",
        "RELAY_PUMPING_GUARD": "off",
        "RELAY_SWEEP_INTERVAL": "0.2",
    }
    key = await asyncio.to_thread(live_key, {**env, "RELAY_DATA_DIR": str(tmp_path / "cli")})
    try:
        with running_receiver(identity) as receiver, cluster(tmp_path, env) as base_url:
            cert = tmp_path / "api" / "tls" / "cert.pem"
            await asyncio.to_thread(wait_ready, base_url, cert)
            await asyncio.to_thread(
                exercise, base_url, cert, key, receiver.url("/ok"), peer, receiver
            )
    finally:
        await peer.stop()


def live_key(env: dict[str, str]) -> str:
    created = subprocess.run(
        [*RELAY, "accounts", "create", "Cluster", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    key: str = json.loads(created.stdout)["live_key"]
    return key


def exercise(base_url: str, cert: Path, key: str, hook: str, peer: SmppPeer, receiver: Any) -> None:
    numbers = [f"+1415559{i:04d}" for i in range(NUMBERS)]

    def create(index: int) -> httpx.Response:
        with client(base_url, cert, key) as api:
            return api.post("/v1/verifications", json={"to": numbers[index], "webhook_url": hook})

    def create_once(_: int) -> httpx.Response:
        with client(base_url, cert, key) as api:
            body = {"to": "+14155598888", "webhook_url": hook}
            return api.post("/v1/verifications", json=body, headers={"Idempotency-Key": "one"})

    opened = race(NUMBERS, create)
    assert [r.status_code for r in opened] == [200] * NUMBERS
    replays = race(RACERS, create_once)
    assert {r.status_code for r in replays} <= {200, 409}
    assert len({r.json()["id"] for r in replays if r.status_code == 200}) == 1

    # Each attempt is one SMS: every number got exactly one submit, whichever
    # worker claimed it, and the idempotent creates sent one between them.
    everyone = [n.lstrip("+") for n in [*numbers, "+14155598888"]]
    poll(lambda: all(peer.seen("submit", destination_addr=n) for n in everyone), "every submit")
    time.sleep(1.0)  # time for a duplicate submit, if any process were to make one
    assert [len(peer.seen("submit", destination_addr=n)) for n in everyone] == [1] * len(everyone)

    codes = {
        n: re.search(r"\b(\d{6})\b", peer.seen("submit", destination_addr=n)[0]["text"]).group(1)  # type: ignore[union-attr]
        for n in everyone
    }
    maxed, approved = opened[0].json()["id"], opened[1].json()["id"]

    def wrong(_: int) -> httpx.Response:
        with client(base_url, cert, key) as api:
            return api.post("/v1/verifications/check", json={"id": maxed, "code": "000001"})

    def right(_: int) -> httpx.Response:
        body = {"id": approved, "code": codes[numbers[1].lstrip("+")]}
        with client(base_url, cert, key) as api:
            return api.post("/v1/verifications/check", json=body)

    counted = [r for r in race(RACERS, wrong) if r.status_code == 200]
    assert len(counted) == 5
    approvals = [r for r in race(RACERS, right) if r.status_code == 200]
    assert len(approvals) == 1
    assert approvals[0].json()["status"] == "approved"

    with client(base_url, cert, key) as api:

        def events() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            after = None
            while True:
                params: dict[str, Any] = {"limit": 100}
                if after:
                    params["starting_after"] = after
                page = api.get("/v1/events", params=params).json()
                found += page["data"]
                if not page["has_more"]:
                    return found
                after = page["data"][-1]["id"]

        def settled() -> bool:
            current = events()
            delivered = [e for e in current if e["type"] == "verification.delivered"]
            return len(delivered) == len(everyone) and all(
                e["delivery_status"] == "delivered" for e in current
            )

        poll(settled, "every event delivered")
        final = events()
        assert api.get(f"/v1/verifications/{maxed}").json()["remaining_checks"] == 0

    kinds = [e["type"] for e in final]
    assert kinds.count("verification.approved") == 1
    assert kinds.count("verification.max_attempts_reached") == 1
    assert kinds.count("verification.sent") == len(everyone)
    # At least once: every event reached the receiver.
    assert {e["id"] for e in final} <= set(receiver.answered)
