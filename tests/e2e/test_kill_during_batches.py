"""`relay serve` killed with -9 while batches of creates commit loses none it answered.

Group commit answers every request of a batch only after the batch's COMMIT.
Were an answer sent before it, a kill would land, now and then, between an
answer and its COMMIT: after the restart, an id the client holds would be
missing, or its retry would find the Idempotency-Key still in use instead of
the stored answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_relay_command import relay
from tests.harness import TEST_CODE_KEY, free_port
from tests.webhooks.receiver import isolated_database, number
from tests.webhooks.test_crash_recovery import wait_ready

RELAY = [sys.executable, "-m", "relay.cli.main"]
# Enough requests in flight at once that each commit takes many of them.
CLIENTS = 32
# Each kill is one chance to land between an answer and its COMMIT: several.
KILLS = 3
ANSWERS_BEFORE_KILL = 150
# A kill comes after this many seconds even if fewer creates were answered.
DRIVE_AT_MOST = 8.0


@dataclass(frozen=True)
class Answered:
    idempotency_key: str
    to: str
    id: str
    body: bytes


@dataclass
class Run:
    answered: list[Answered] = field(default_factory=list)
    statuses: Counter[int | str] = field(default_factory=Counter)
    in_flight: int = 0
    in_flight_at_kill: int | None = None


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": isolated_database(database_url, "kill", tmp_path),
        "RELAY_CODE_KEY": TEST_CODE_KEY,
        # Hundreds of creates a second from one key to one prefix is what these
        # guards refuse; the refusals would only hide what this test looks for.
        "RELAY_RATE_LIMIT": "1000000",
        "RELAY_RATE_LIMIT_BURST": "1000000",
        "RELAY_PUMPING_GUARD": "off",
    }


@contextlib.contextmanager
def serving(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    base_url = f"https://127.0.0.1:{port}"
    # A file, not a pipe: one log line per request would fill an unread pipe and stall the server.
    with log.open("a") as out:
        process = subprocess.Popen(
            [*RELAY, "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        try:
            wait_ready(base_url, Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem", process)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{log.read_text()}") from None
        yield process, base_url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        process.wait(timeout=20)


def api(base_url: str, env: dict[str, str], key: str) -> httpx.AsyncClient:
    cert = Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"
    return httpx.AsyncClient(
        base_url=base_url,
        verify=ssl.create_default_context(cafile=os.fspath(cert)),
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
        limits=httpx.Limits(max_connections=CLIENTS),
    )


async def create_until_killed(
    client: httpx.AsyncClient, process: subprocess.Popen[str], serial: Iterator[int]
) -> Run:
    """Creates from CLIENTS loops at once; SIGKILL the server with the rest in flight."""
    run = Run()
    stop_at = time.monotonic() + DRIVE_AT_MOST

    async def one_client() -> None:
        while run.in_flight_at_kill is None:
            n = next(serial)
            key, to = f"kill-{n:05}", number(n)
            run.in_flight += 1
            try:
                response = await client.post(
                    "/v1/verifications", json={"to": to}, headers={"Idempotency-Key": key}
                )
            except httpx.TransportError:
                killed = run.in_flight_at_kill is not None
                run.statuses["no answer, killed" if killed else "no answer"] += 1
                continue
            finally:
                run.in_flight -= 1
            # Counted even after the kill: an answer the server wrote just before
            # dying still reaches the client, and must be durable like the rest.
            run.statuses[response.status_code] += 1
            if response.status_code == 200:
                run.answered.append(Answered(key, to, response.json()["id"], response.content))
            if run.in_flight_at_kill is None and (
                len(run.answered) >= ANSWERS_BEFORE_KILL or time.monotonic() > stop_at
            ):
                run.in_flight_at_kill = run.in_flight
                process.kill()

    await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return run


async def a_few_at_a_time(
    requests: list[Coroutine[Any, Any, httpx.Response]],
) -> list[httpx.Response]:
    gate = asyncio.Semaphore(CLIENTS)

    async def one(request: Coroutine[Any, Any, httpx.Response]) -> httpx.Response:
        async with gate:
            return await request

    return await asyncio.gather(*(one(r) for r in requests))


async def recheck(
    client: httpx.AsyncClient, answered: list[Answered]
) -> tuple[list[httpx.Response], list[httpx.Response]]:
    """Each answered verification retrieved, and each answered create sent again."""
    found = await a_few_at_a_time([client.get(f"/v1/verifications/{a.id}") for a in answered])
    retried = await a_few_at_a_time(
        [
            client.post(
                "/v1/verifications",
                json={"to": a.to},
                headers={"Idempotency-Key": a.idempotency_key},
            )
            for a in answered
        ]
    )
    return found, retried


async def one_life(
    base_url: str,
    env: dict[str, str],
    key: str,
    answered: list[Answered],
    kill: tuple[subprocess.Popen[str], Iterator[int]] | None,
) -> tuple[list[httpx.Response], list[httpx.Response], Run | None]:
    """What was answered before, looked up again; then, unless this is the last
    life, new creates until the server is killed."""
    async with api(base_url, env, key) as client:
        found, retried = await recheck(client, answered)
        run = None if kill is None else await create_until_killed(client, *kill)
    return found, retried, run


def assert_kept(
    answered: list[Answered], found: list[httpx.Response], retried: list[httpx.Response]
) -> None:
    lost = [
        a.id for a, response in zip(answered, found, strict=True) if response.status_code != 200
    ]
    assert not lost, f"{len(lost)} of {len(answered)} answered verifications lost: {lost[:10]}"
    assert [r.json()["status"] for r in found] == ["pending"] * len(found)
    # The stored first answer, byte for byte: no second create, and no resend.
    not_replayed = [
        (a.idempotency_key, response.status_code, response.text[:200])
        for a, response in zip(answered, retried, strict=True)
        if response.headers.get("idempotent-replayed") != "true" or response.content != a.body
    ]
    assert not not_replayed, f"{len(not_replayed)} of {len(answered)}: {not_replayed[:5]}"


@pytest.mark.slow
def test_relay_killed_mid_batch_keeps_every_verification_it_answered(
    env: dict[str, str], tmp_path: Path
) -> None:
    key = json.loads(relay("accounts", "create", "Kill", "--json", env=env).stdout)["test_key"]
    log = tmp_path / "serve.log"
    serial = itertools.count()
    answered: list[Answered] = []
    for life in range(KILLS + 1):
        with serving(env, log) as (server, base_url):
            last = life == KILLS
            found, retried, run = asyncio.run(
                one_life(base_url, env, key, answered, None if last else (server, serial))
            )
        assert_kept(answered, found, retried)
        if run is None:
            break
        report = f"answered {len(run.answered)}, in flight at the kill {run.in_flight_at_kill}"
        print(f"{report}, statuses {dict(run.statuses)}")  # shown with -s: what the kill met
        assert run.answered, log.read_text()
        assert run.in_flight_at_kill, report
        # Before the kill every create succeeds; after it, requests go unanswered.
        assert set(run.statuses) <= {200, "no answer, killed"}, (run.statuses, log.read_text())
        answered += run.answered
    assert len({a.id for a in answered}) == len(answered)
