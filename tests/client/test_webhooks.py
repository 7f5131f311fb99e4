"""`relay_client.webhooks.verify` on deliveries a live Relay signed and sent."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from relay.accounts.models import NewAccount
from relay_client import Relay, SignatureVerificationError, webhooks
from tests.client.conftest import LiveRelay, fresh_number
from tests.webhooks.receiver import Received, wait_until


def delivered(live: LiveRelay, relay: Relay) -> Received:
    """The delivery of a new verification's `verification.sent`, as the receiver got it
    (its events are delivered concurrently, in any order)."""
    created = relay.verifications.create(fresh_number(), webhook_url=live.receiver.url("/ok"))

    def about_it() -> list[Received]:
        return [
            r
            for r in live.receiver.requests("/ok")
            if r.event["data"]["object"]["id"] == created["id"]
            and r.event["type"] == "verification.sent"
        ]

    wait_until(lambda: bool(about_it()), what="a webhook delivery")
    return about_it()[0]


def resign(body: bytes, secret: str, timestamp: int) -> dict[str, str]:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return {"Relay-Signature": f"t={timestamp}, v1={digest.hexdigest()}"}


def test_a_genuine_delivery_verifies_and_gives_the_event(
    live: LiveRelay, relay: Relay, keys: NewAccount
) -> None:
    received = delivered(live, relay)
    event = webhooks.verify(received.body, received.headers, keys.test_webhook_secret)
    assert event["id"] == received.event_id
    assert event["type"] == "verification.sent"
    assert event["data"]["object"]["object"] == "verification"


def test_header_names_match_in_any_case_and_text_bodies_work(
    live: LiveRelay, relay: Relay, keys: NewAccount
) -> None:
    received = delivered(live, relay)
    headers = {"RELAY-SIGNATURE": received.signature}
    event = webhooks.verify(received.body.decode(), headers, keys.test_webhook_secret)
    assert event["id"] == received.event_id


def test_a_tampered_body_is_refused(live: LiveRelay, relay: Relay, keys: NewAccount) -> None:
    received = delivered(live, relay)
    tampered = received.body.replace(b'"livemode":false', b'"livemode":true')
    assert tampered != received.body
    with pytest.raises(SignatureVerificationError):
        webhooks.verify(tampered, received.headers, keys.test_webhook_secret)


def test_another_accounts_secret_is_refused(live: LiveRelay, relay: Relay) -> None:
    received = delivered(live, relay)
    with pytest.raises(SignatureVerificationError):
        webhooks.verify(received.body, received.headers, "whsec_someone-else")


def test_an_old_timestamp_is_refused_even_when_correctly_signed(
    live: LiveRelay, relay: Relay, keys: NewAccount
) -> None:
    received = delivered(live, relay)
    old = resign(received.body, keys.test_webhook_secret, int(time.time()) - 301)
    with pytest.raises(SignatureVerificationError, match="from now"):
        webhooks.verify(received.body, old, keys.test_webhook_secret)
    recent = resign(received.body, keys.test_webhook_secret, int(time.time()) - 200)
    assert (
        webhooks.verify(received.body, recent, keys.test_webhook_secret)["id"] == received.event_id
    )


def test_a_delivery_is_judged_by_the_time_it_is_checked(
    live: LiveRelay, relay: Relay, keys: NewAccount
) -> None:
    received = delivered(live, relay)
    later = time.time() + 3600
    with pytest.raises(SignatureVerificationError):
        webhooks.verify(received.body, received.headers, keys.test_webhook_secret, now=later)
    assert webhooks.verify(
        received.body, received.headers, keys.test_webhook_secret, tolerance=7200, now=later
    )


def test_any_of_several_signatures_may_match_during_a_secret_roll(
    live: LiveRelay, relay: Relay, keys: NewAccount
) -> None:
    received = delivered(live, relay)
    rolled = {"relay-signature": received.signature.replace("v1=", "v1=0000, v1=", 1)}
    assert (
        webhooks.verify(received.body, rolled, keys.test_webhook_secret)["id"] == received.event_id
    )


@pytest.mark.parametrize(
    "headers",
    [{}, {"Relay-Signature": ""}, {"Relay-Signature": "v1=abc"}, {"Relay-Signature": "t=1"}],
)
def test_a_missing_or_malformed_header_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(SignatureVerificationError):
        webhooks.verify(b"{}", headers, "whsec_x")
