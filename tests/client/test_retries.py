"""Retries: bounded, spaced, honouring Retry-After, and always under one idempotency key,
so a retried create never sends a second SMS."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest

from relay.accounts.models import NewAccount
from relay_client import APIConnectionError, APIError, AsyncRelay, ConflictError, Relay
from tests.client.conftest import LiveRelay, fresh_number
from tests.client.loopback import Answer, Script, cutting_proxy, scripted
from tests.harness import count_rows, free_port

VERIFICATION = json.dumps({"id": "ver_1", "object": "verification"}).encode()


def error(status: int, code: str, kind: str = "api_error") -> bytes:
    detail = {"type": kind, "code": code, "message": code, "doc_url": f"x#{code}"}
    return json.dumps({"error": detail}).encode()


def client_of(script: Script, max_retries: int = 2) -> tuple[Relay, list[float]]:
    """A client whose waits are recorded instead of slept."""
    client = Relay("sk_test_x", base_url=script.base_url, max_retries=max_retries)
    slept: list[float] = []
    client._sleep = slept.append
    return client, slept


def test_a_429_is_retried_after_its_retry_after_with_the_same_key() -> None:
    limited = Answer(429, error(429, "rate_limited", "rate_limit_error"), {"Retry-After": "2"})
    with scripted(limited, Answer(200, VERIFICATION)) as script:
        client, slept = client_of(script)
        assert client.verifications.create("+14155550100")["id"] == "ver_1"
    assert slept == [2.0]
    first, second = script.keys()
    assert first is not None
    assert first == second


def test_server_errors_are_retried_with_growing_waits_under_one_key() -> None:
    with scripted(
        Answer(500, error(500, "internal_error")),
        Answer(502, b"<html>bad gateway</html>"),
        Answer(200, VERIFICATION),
    ) as script:
        client, slept = client_of(script)
        client.verifications.cancel("ver_1")
    assert len(script.seen) == 3
    assert len(set(script.keys())) == 1
    assert 0.25 <= slept[0] <= 0.5
    assert 0.5 <= slept[1] <= 1.0


def test_retries_stop_after_max_retries_with_the_last_error() -> None:
    with scripted(Answer(503, error(503, "internal_error"))) as script:
        client, slept = client_of(script, max_retries=3)
        with pytest.raises(APIError) as raised:
            client.messages.send("+14155550100", code="1234")
    assert raised.value.http_status == 503
    assert len(script.seen) == 4
    assert len(slept) == 3


def test_an_answer_that_cannot_change_is_not_retried() -> None:
    with scripted(Answer(503, error(503, "no_route_available"))) as script:
        client, slept = client_of(script)
        with pytest.raises(APIError):
            client.verifications.create("+14155550100")
    assert len(script.seen) == 1
    assert slept == []


def test_a_key_still_in_use_is_retried_until_its_replay_comes() -> None:
    in_use = error(409, "idempotency_key_in_use", "idempotency_error")
    with scripted(Answer(409, in_use), Answer(200, VERIFICATION)) as script:
        client, _ = client_of(script)
        assert client.verifications.create("+14155550100")["id"] == "ver_1"
    assert len(script.seen) == 2


def test_other_conflicts_are_not_retried() -> None:
    closed = error(409, "verification_approved", "invalid_request_error")
    with scripted(Answer(409, closed)) as script:
        client, _ = client_of(script)
        with pytest.raises(ConflictError):
            client.verifications.check("000000", id="ver_1")
    assert len(script.seen) == 1


def test_a_given_idempotency_key_is_sent_as_is_and_gets_are_sent_without_one() -> None:
    with scripted(Answer(200, VERIFICATION)) as script:
        client, _ = client_of(script)
        client.verifications.create("+14155550100", idempotency_key="order-7-otp")
        client.verifications.create("+14155550100")
        client.verifications.create("+14155550100")
        client.verifications.retrieve("ver_1")
    given, generated, other, none = script.keys()
    assert given == "order-7-otp"
    assert generated != other
    assert none is None


def test_a_refused_connection_is_retried_then_raised() -> None:
    client = Relay("sk_test_x", base_url=f"http://127.0.0.1:{free_port()}", max_retries=2)
    slept: list[float] = []
    client._sleep = slept.append
    with pytest.raises(APIConnectionError, match="ConnectError"):
        client.verifications.retrieve("ver_1")
    assert len(slept) == 2


def test_the_async_client_honours_retry_after_too() -> None:
    limited = Answer(429, error(429, "rate_limited", "rate_limit_error"), {"Retry-After": "1"})
    with scripted(limited, Answer(200, VERIFICATION)) as script:
        slept: list[float] = []

        async def record(seconds: float) -> None:
            slept.append(seconds)

        async def go() -> str:
            async with AsyncRelay("sk_test_x", base_url=script.base_url) as client:
                client._sleep = record
                return (await client.verifications.create("+14155550100"))["id"]

        assert asyncio.run(go()) == "ver_1"
    assert slept == [1.0]
    assert len(set(script.keys())) == 1


def test_a_connection_cut_mid_create_is_retried_without_a_second_sms(
    live: LiveRelay, keys: NewAccount
) -> None:
    """Relay makes the verification and sends its SMS; the answer is lost on the way
    back; the client tries again with the same key and gets the first answer."""
    to = fresh_number()
    upstream = urlsplit(live.base_url).port
    assert upstream is not None
    create_line = b"POST /v1/verifications "
    key_pem = live.cert.with_name("key.pem")
    with cutting_proxy(upstream, live.cert, key_pem, cut_first=create_line) as proxy:
        client = live.client(keys.test_key, base_url=proxy.base_url)
        slept: list[float] = []
        client._sleep = slept.append
        with client:
            verification = client.verifications.create(to)
    assert proxy.cuts == 1
    first, retried = proxy.header_values("Idempotency-Key", create_line)
    assert first == retried
    assert len(slept) == 1
    assert len(verification["attempts"]) == 1
    made = count_rows(
        live.settings, "SELECT count(*) AS n FROM verifications WHERE to_number = :to", to=to
    )
    sends = count_rows(
        live.settings,
        "SELECT count(*) AS n FROM attempts WHERE verification_id = :id",
        id=verification["id"],
    )
    assert (made, sends) == (1, 1)
