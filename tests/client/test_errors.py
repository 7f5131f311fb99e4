"""Each of Relay's error answers raises its own class, carrying what the body said."""

from __future__ import annotations

import time

import pytest

from relay.accounts.models import NewAccount
from relay_client import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    Relay,
    RelayError,
)
from tests.client.conftest import LiveRelay, fresh_number
from tests.harness import free_port

MISSING = "ver_" + "0" * 26


def test_an_unknown_key_raises_authentication_error(live: LiveRelay) -> None:
    with live.client("sk_test_not-a-key") as client, pytest.raises(AuthenticationError) as raised:
        client.verifications.retrieve(MISSING)
    error = raised.value
    assert error.http_status == 401
    assert error.type == "authentication_error"
    assert error.code == "authentication_failed"
    assert error.doc_url is not None
    assert error.doc_url.endswith("/docs/errors#authentication_failed")
    assert error.request_id is not None
    assert error.request_id.startswith("req_")
    assert "sk_test_not-a-key" not in str(error)


def test_an_unknown_id_raises_not_found_error_naming_the_param(relay: Relay) -> None:
    with pytest.raises(NotFoundError) as raised:
        relay.verifications.retrieve(MISSING)
    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"
    assert raised.value.param == "id"
    with pytest.raises(NotFoundError):
        relay.messages.retrieve("msg_" + "0" * 26)
    with pytest.raises(NotFoundError):
        relay.events.retrieve("evt_" + "0" * 26)


def test_checking_an_approved_verification_raises_conflict_error(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    relay.verifications.check("000000", id=created["id"])
    with pytest.raises(ConflictError) as raised:
        relay.verifications.check("000000", id=created["id"])
    assert raised.value.http_status == 409
    assert raised.value.code == "verification_approved"


def test_a_malformed_number_raises_invalid_request_error(relay: Relay) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        relay.verifications.create("12345")
    assert raised.value.http_status == 400
    assert raised.value.type == "invalid_request_error"
    assert raised.value.code == "phone_number_invalid"
    assert raised.value.param == "to"


def test_an_out_of_range_field_is_named_in_param(relay: Relay) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        relay.verifications.create(fresh_number(), code_length=99)
    assert raised.value.code == "parameter_invalid"
    assert raised.value.param == "code_length"


def test_a_long_retry_after_raises_rate_limit_error_at_once(relay: Relay) -> None:
    """resend_too_soon asks for 30 s: the client hands that to the caller, not to sleep()."""
    to = fresh_number()
    relay.verifications.create(to)
    started = time.monotonic()
    with pytest.raises(RateLimitError) as raised:
        relay.verifications.create(to)
    assert time.monotonic() - started < 5
    assert raised.value.http_status == 429
    assert raised.value.code == "resend_too_soon"
    assert raised.value.retry_after == 30
    assert len(relay.verifications.retrieve(raised_id(relay, to))["attempts"]) == 1


def raised_id(relay: Relay, to: str) -> str:
    (only,) = relay.verifications.list(to=to)
    return only["id"]


def test_a_live_key_without_carriers_raises_api_error(live: LiveRelay, keys: NewAccount) -> None:
    with live.client(keys.live_key) as client, pytest.raises(APIError) as raised:
        client.verifications.create("+14155552671")
    assert raised.value.http_status == 503
    assert raised.value.type == "api_error"
    assert raised.value.code == "no_route_available"


def test_no_server_raises_api_connection_error(live: LiveRelay, keys: NewAccount) -> None:
    base_url = f"https://127.0.0.1:{free_port()}"
    with (
        live.client(keys.test_key, base_url=base_url, max_retries=0) as client,
        pytest.raises(APIConnectionError) as raised,
    ):
        client.verifications.create(fresh_number())
    assert raised.value.http_status is None
    assert isinstance(raised.value, APIError)


def test_an_untrusted_certificate_fails_without_retrying(keys: NewAccount, live: LiveRelay) -> None:
    with Relay(keys.test_key, base_url=live.base_url, max_retries=5) as client:
        slept: list[float] = []
        client._sleep = slept.append
        with pytest.raises(APIConnectionError):
            client.verifications.retrieve(MISSING)
    assert slept == []


def test_every_error_class_is_a_relay_error() -> None:
    classes = [
        InvalidRequestError,
        AuthenticationError,
        RateLimitError,
        NotFoundError,
        ConflictError,
        APIError,
        APIConnectionError,
    ]
    assert all(issubclass(cls, RelayError) for cls in classes)
