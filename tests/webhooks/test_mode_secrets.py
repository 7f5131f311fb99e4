"""Test and live events are signed with secrets of their own mode.

Driven as an attacker holding a test key would: over HTTPS, through the
console's Account page and its roll form, with live verifications whose
webhooks reach a real HTTPS receiver.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from relay.accounts import store as account_store
from relay.accounts.models import NewAccount
from relay.webhooks import WebhookVerificationError, verify
from tests.harness import RunningServer, create_account, read_db
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    isolated_database,
    number,
    settled,
    webhook_server,
)

ADMIN_TOKEN = "admin-token-for-the-mode-secret-tests"
_numbers = itertools.count(3000)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, identity: Identity
) -> Iterator[RunningServer]:
    """Live keys send through a sandbox carrier of their own, so live events happen."""
    url = isolated_database(database_url, "mode_secrets", tmp_path_factory.mktemp("db"))
    with webhook_server(
        tmp_path_factory.mktemp("data"),
        url,
        identity,
        carriers={"live-a": {"kind": "sandbox"}},
        routes={"default": ["live-a"]},
        admin_token=ADMIN_TOKEN,
        console_signin_burst=50,
    ) as running:
        yield running


@pytest.fixture
def account(server: RunningServer) -> NewAccount:
    return create_account(server.settings)


@pytest.fixture
def browser(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        client.headers["Origin"] = server.base_url
        yield client


def signed_in(browser: httpx.Client, secret: str, path: str = "/console/account") -> str:
    """Signs in; answers the Account page, whose forms carry the session's CSRF token."""
    assert browser.post("/console/sign-in", data={"secret": secret}).status_code == 303
    page = browser.get(path)
    assert page.status_code == 200, page.text
    return page.text


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


def new_secret_of(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    found = re.search(r'id="new-secret"[^>]*>(whsec_[A-Za-z0-9]+)<', answer.text)
    assert found is not None, answer.text
    return found.group(1)


def live_secrets(server: RunningServer, account: NewAccount) -> list[tuple[str, bytes]]:
    """The account's active live secrets as stored (sealed), read on a connection of our own."""
    now = datetime.now(UTC)
    return read_db(
        server.settings,
        lambda tx: account_store.active_webhook_secrets(tx, account.id, livemode=True, now=now),
    )


def delivered(server: RunningServer, key: str, receiver: Receiver) -> list[Any]:
    """The receiver's requests for the opening events of a new verification made with `key`."""
    with server.client(key) as api:
        body = {"to": number(next(_numbers)), "webhook_url": receiver.url("/ok")}
        created = api.post("/v1/verifications", json=body)
        assert created.status_code == 200, created.text
        events = settled(api, created.json()["id"], 2)
    assert [e["delivery_status"] for e in events] == ["delivered", "delivered"]
    requests = [request for event in events for request in receiver.for_event(event["id"])]
    assert len(requests) == len(events)
    return requests


def test_a_secret_rolled_in_a_test_key_session_does_not_verify_a_live_event(
    server: RunningServer, account: NewAccount, browser: httpx.Client, receiver: Receiver
) -> None:
    page = signed_in(browser, account.test_key)
    rolled = new_secret_of(
        browser.post(
            "/console/actions/roll-secret",
            data={"csrf": csrf_of(page), "account_id": account.id, "mode": "test"},
        )
    )

    for request in delivered(server, account.live_key, receiver):
        assert request.event["livemode"] is True
        with pytest.raises(WebhookVerificationError):
            verify(request.body, request.signature, rolled)
        with pytest.raises(WebhookVerificationError):
            verify(request.body, request.signature, account.test_webhook_secret)
        # Rolling the test secret left the live one alone: it alone signs, as before.
        assert request.signature.count("v1=") == 1
        verify(request.body, request.signature, account.live_webhook_secret)

    # The roll itself worked for test events: the old and the new test secret both sign.
    for request in delivered(server, account.test_key, receiver):
        assert request.event["livemode"] is False
        assert request.signature.count("v1=") == 2
        verify(request.body, request.signature, rolled)
        verify(request.body, request.signature, account.test_webhook_secret)
        with pytest.raises(WebhookVerificationError):
            verify(request.body, request.signature, account.live_webhook_secret)


def test_a_test_key_session_is_offered_only_the_test_secret(
    account: NewAccount, browser: httpx.Client
) -> None:
    page = signed_in(browser, account.test_key)
    assert "Webhook signing secret: test mode" in page
    assert 'value="test"' in page
    assert 'value="live"' not in page
    assert "Roll live" not in page
    assert account.live_webhook_secret not in page
    assert account.test_webhook_secret not in page


def test_a_forged_post_for_the_live_secret_from_a_test_key_session_is_refused(
    server: RunningServer, account: NewAccount, browser: httpx.Client
) -> None:
    page = signed_in(browser, account.test_key)
    before = live_secrets(server, account)

    answer = browser.post(
        "/console/actions/roll-secret",
        data={"csrf": csrf_of(page), "account_id": account.id, "mode": "live"},
    )

    assert answer.status_code == 403
    assert 'role="alert"' in answer.text
    assert "whsec_" not in answer.text
    assert live_secrets(server, account) == before


def test_a_live_key_session_rolls_the_live_secret_and_a_live_event_verifies_with_it(
    server: RunningServer, account: NewAccount, browser: httpx.Client, receiver: Receiver
) -> None:
    page = signed_in(browser, account.live_key)
    assert "Webhook signing secret: live mode" in page
    assert 'value="test"' not in page
    rolled = new_secret_of(
        browser.post(
            "/console/actions/roll-secret",
            data={"csrf": csrf_of(page), "account_id": account.id, "mode": "live"},
        )
    )

    for request in delivered(server, account.live_key, receiver):
        verify(request.body, request.signature, rolled)
        verify(request.body, request.signature, account.live_webhook_secret)
    for request in delivered(server, account.test_key, receiver):
        assert request.signature.count("v1=") == 1
        with pytest.raises(WebhookVerificationError):
            verify(request.body, request.signature, rolled)


def test_an_admin_is_offered_both_secrets_and_the_answer_names_the_mode(
    server: RunningServer, account: NewAccount, browser: httpx.Client, receiver: Receiver
) -> None:
    page = signed_in(browser, ADMIN_TOKEN, f"/console/account?account={account.id}")
    assert 'id="roll-test"' in page
    assert 'id="roll-live"' in page
    assert f'value="{account.id}"' in page

    answer = browser.post(
        "/console/actions/roll-secret",
        data={"csrf": csrf_of(page), "account_id": account.id, "mode": "live"},
    )
    rolled = new_secret_of(answer)
    assert "live-mode webhook signing secret" in answer.text

    for request in delivered(server, account.live_key, receiver):
        verify(request.body, request.signature, rolled)
    missing = browser.post(
        "/console/actions/roll-secret",
        data={"csrf": csrf_of(page), "account_id": account.id},
    )
    assert missing.status_code == 400
    assert 'role="alert"' in missing.text
