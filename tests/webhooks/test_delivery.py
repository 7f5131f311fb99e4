"""Webhook delivery end to end: a real Relay server posting to a real HTTPS receiver."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.webhooks import WebhookVerificationError, verify
from tests.harness import TEST_CODE_KEY, RunningServer
from tests.webhooks.receiver import (
    SCHEDULE,
    TIMEOUT,
    Identity,
    Receiver,
    isolated_database,
    number,
    settled,
    webhook_server,
)

ENVELOPE = {"id", "object", "type", "created_at", "livemode", "data"}
POLL = 10.0
_numbers = itertools.count(100)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, identity: Identity
) -> Iterator[RunningServer]:
    """Replaces the suite's server here: this one trusts the receiver and retries fast."""
    url = isolated_database(database_url, "delivery", tmp_path_factory.mktemp("db"))
    data = tmp_path_factory.mktemp("data")
    # A slow poll: a delivery that comes quickly was woken by its commit.
    with webhook_server(data, url, identity, webhook_poll_interval=POLL) as running:
        yield running


def create(api: httpx.Client, receiver: Receiver, path: str, **fields: Any) -> dict[str, Any]:
    body = {"to": number(next(_numbers)), "webhook_url": receiver.url(path), **fields}
    response = api.post("/v1/verifications", json=body)
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def check(api: httpx.Client, verification_id: str, code: str) -> dict[str, Any]:
    response = api.post("/v1/verifications/check", json={"id": verification_id, "code": code})
    assert response.status_code == 200, response.text
    checked: dict[str, Any] = response.json()
    return checked


def received_events(receiver: Receiver, verification_id: str) -> list[dict[str, Any]]:
    """Each event the receiver got about one verification, once, in the order they fired."""
    bodies = {
        r.event_id: r.event
        for r in receiver.requests()
        if r.event["data"]["object"]["id"] == verification_id
    }
    return [bodies[event_id] for event_id in sorted(bodies)]


def timestamp_of(signature: str) -> int:
    return int(signature.split(",")[0].removeprefix("t="))


# --- the delivery contract -----------------------------------------------------


def test_a_2xx_answer_delivers_each_event_once_within_a_moment_signed_with_the_account_secret(
    api: httpx.Client, account: NewAccount, receiver: Receiver
) -> None:
    started = time.monotonic()
    created = create(api, receiver, "/ok")

    events = settled(api, created["id"], 2)

    assert [e["delivery_status"] for e in events] == ["delivered", "delivered"]
    for event in events:
        [request] = receiver.for_event(event["id"])
        assert request.arrived - started < POLL / 2  # woken by the commit, not by a poll
        assert request.headers["content-type"] == "application/json"
        verify(request.body, request.signature, account.test_webhook_secret)
        [attempt] = event["delivery_attempts"]
        assert (attempt["status_code"], attempt["error"]) == (200, None)
        assert 0 <= attempt["duration_ms"] < TIMEOUT * 1000


@pytest.mark.parametrize(
    ("path", "status_code", "error"),
    [("/error", 500, "http_status"), ("/redirect", 302, "redirect"), ("/hang", None, "timeout")],
)
def test_a_failing_receiver_gets_three_retries_further_and_further_apart_then_the_event_drops(
    api: httpx.Client,
    account: NewAccount,
    receiver: Receiver,
    path: str,
    status_code: int | None,
    error: str,
) -> None:
    created = create(api, receiver, path)

    events = settled(api, created["id"], 2)

    for event in events:
        assert event["delivery_status"] == "dropped"
        attempts = [(a["status_code"], a["error"]) for a in event["delivery_attempts"]]
        assert attempts == [(status_code, error)] * 4
        requests = receiver.for_event(event["id"])
        assert [r.path for r in requests] == [path] * 4  # a redirect is never followed
        assert len({r.body for r in requests}) == 1  # same id, same bytes
        for request in requests:
            verify(request.body, request.signature, account.test_webhook_secret)
        # Lower bounds only: a stall of a loaded machine can stretch a gap, never shorten it.
        gaps = [b.arrived - a.arrived for a, b in pairwise(requests)]
        for gap, delay in zip(gaps, SCHEDULE, strict=True):
            assert gap >= delay * 0.9


def test_a_retried_event_keeps_its_id_and_bytes_and_is_signed_afresh_each_time(
    api: httpx.Client, account: NewAccount, receiver: Receiver
) -> None:
    created = create(api, receiver, "/flaky")

    events = settled(api, created["id"], 2)

    for event in events:
        assert event["delivery_status"] == "delivered"
        statuses = [a["status_code"] for a in event["delivery_attempts"]]
        assert statuses == [500, 500, 200]
        requests = receiver.for_event(event["id"])
        assert len(requests) == 3
        assert len({r.body for r in requests}) == 1
        assert {k: v for k, v in event.items() if k in ENVELOPE} == requests[0].event
        stamps = [timestamp_of(r.signature) for r in requests]
        assert stamps == sorted(stamps)
        for request in requests:
            verify(request.body, request.signature, account.test_webhook_secret)


def test_an_endless_response_body_is_cut_short_and_a_200_still_counts_as_delivered(
    api: httpx.Client, receiver: Receiver
) -> None:
    created = create(api, receiver, "/huge")

    events = settled(api, created["id"], 2)

    for event in events:
        assert event["delivery_status"] == "delivered"
        [attempt] = event["delivery_attempts"]
        assert attempt["status_code"] == 200
        assert attempt["duration_ms"] < TIMEOUT * 1000


# --- which events, with what in them --------------------------------------------


def assert_envelope(event: dict[str, Any], kind: str) -> None:
    assert set(event) == ENVELOPE
    assert event["id"].startswith("evt_")
    assert (event["object"], event["type"], event["livemode"]) == ("event", kind, False)
    assert event["created_at"].endswith("Z")
    datetime.fromisoformat(event["created_at"])
    assert set(event["data"]) == {"object"}


def assert_opening_events(events: list[dict[str, Any]], created: dict[str, Any]) -> None:
    sent, delivered = events[:2]
    assert_envelope(sent, "verification.sent")
    assert_envelope(delivered, "verification.delivered")
    # verification.sent shows the attempt as handed to the carrier; delivered, as confirmed.
    just_sent = {**created, "attempts": [{**created["attempts"][0], "status": "sent"}]}
    assert sent["data"]["object"] == just_sent
    assert delivered["data"]["object"] == created


def test_an_approved_verification_sends_sent_delivered_then_approved(
    api: httpx.Client, receiver: Receiver
) -> None:
    created = create(api, receiver, "/ok", metadata={"user_id": "42"})
    approved = check(api, created["id"], "000000")

    settled(api, created["id"], 3)

    events = received_events(receiver, created["id"])
    assert [e["type"] for e in events] == [
        "verification.sent",
        "verification.delivered",
        "verification.approved",
    ]
    assert_opening_events(events, created)
    assert_envelope(events[2], "verification.approved")
    assert events[2]["data"]["object"] == approved
    assert approved["status"] == "approved"
    assert approved["metadata"] == {"user_id": "42"}


def test_five_wrong_checks_send_sent_delivered_then_max_attempts_reached(
    api: httpx.Client, receiver: Receiver
) -> None:
    created = create(api, receiver, "/ok", metadata={"order": "A-1"})
    checks = [check(api, created["id"], "111111") for _ in range(5)]

    settled(api, created["id"], 3)

    events = received_events(receiver, created["id"])
    assert [e["type"] for e in events] == [
        "verification.sent",
        "verification.delivered",
        "verification.max_attempts_reached",
    ]
    assert_opening_events(events, created)
    assert_envelope(events[2], "verification.max_attempts_reached")
    assert events[2]["data"]["object"] == checks[-1]
    assert checks[-1]["status"] == "max_attempts_reached"
    assert checks[-1]["remaining_checks"] == 0
    assert checks[-1]["metadata"] == {"order": "A-1"}


def test_a_verification_left_past_its_ttl_sends_sent_delivered_then_expired_from_the_sweep(
    api: httpx.Client, receiver: Receiver, server: RunningServer
) -> None:
    created = create(api, receiver, "/ok", ttl=60)
    settled(api, created["id"], 2)

    server.clock.advance(61)
    settled(api, created["id"], 3)

    events = received_events(receiver, created["id"])
    assert [e["type"] for e in events][2:] == ["verification.expired"]
    assert_opening_events(events, created)
    assert_envelope(events[2], "verification.expired")
    expired = api.get(f"/v1/verifications/{created['id']}").json()
    assert expired["status"] == "expired"
    assert events[2]["data"]["object"] == expired


# --- secret rotation ---------------------------------------------------------------


def roll_secret(server: RunningServer, account: NewAccount, tmp_path: Path, overlap: int) -> str:
    env = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path),
        "RELAY_DATABASE_URL": server.settings.resolved_database_url,
        "RELAY_CODE_KEY": TEST_CODE_KEY,
    }
    command = [sys.executable, "-m", "relay.cli.main", "accounts", "roll-webhook-secret"]
    done = subprocess.run(
        [*command, account.id, "--mode", "test", "--overlap", str(overlap), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rolled = json.loads(done.stdout)
    assert set(rolled) == {"account_id", "mode", "webhook_secret", "previous_secrets_expire_at"}
    assert rolled["mode"] == "test"
    secret: str = rolled["webhook_secret"]
    assert secret.startswith("whsec_")
    assert secret != account.test_webhook_secret
    return secret


def test_during_a_secret_roll_deliveries_verify_with_either_secret_and_after_it_only_the_new(
    api: httpx.Client,
    account: NewAccount,
    receiver: Receiver,
    server: RunningServer,
    tmp_path: Path,
) -> None:
    new_secret = roll_secret(server, account, tmp_path, overlap=60)

    during = create(api, receiver, "/ok")
    for event in settled(api, during["id"], 2):
        [request] = receiver.for_event(event["id"])
        assert request.signature.count("v1=") == 2
        verify(request.body, request.signature, account.test_webhook_secret)
        verify(request.body, request.signature, new_secret)

    server.clock.advance(61)
    after = create(api, receiver, "/ok")
    for event in settled(api, after["id"], 2):
        [request] = receiver.for_event(event["id"])
        assert request.signature.count("v1=") == 1
        verify(request.body, request.signature, new_secret)
        with pytest.raises(WebhookVerificationError):
            verify(request.body, request.signature, account.test_webhook_secret)
