"""The console over plain HTTPS: headers, the cookie, refusals, and the API left alone."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.harness import RunningServer, ServerThread, create_account, test_settings


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Its own server: the sign-in limit here is tight, and counts per address."""
    settings = test_settings(tmp_path_factory.mktemp("data"), database_url, console_signin_burst=3)
    with ServerThread(settings) as running:
        yield running


@pytest.fixture
def browser(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        client.headers["Origin"] = server.base_url
        yield client


def test_a_key_signs_in_with_a_strict_short_lived_cookie(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    answer = browser.post("/console/sign-in", data={"secret": account.test_key})
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"].lower()
    for attribute in ("httponly", "secure", "samesite=strict", "max-age=1800", "path=/console"):
        assert attribute in cookie
    page = browser.get("/console/overview")
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "<script" not in page.text


def test_a_post_from_another_origin_is_refused(
    server: RunningServer, browser: httpx.Client
) -> None:
    account: NewAccount = create_account(server.settings)
    browser.headers["Origin"] = "https://evil.example"
    answer = browser.post("/console/sign-in", data={"secret": account.test_key})
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers


def test_pages_without_a_session_show_the_sign_in_form(browser: httpx.Client) -> None:
    answer = browser.get("/console/timeline/ver_01M88CRCDRD00EV5FYEJQY2B1K")
    assert answer.status_code == 200
    assert 'id="secret"' in answer.text


def test_the_api_does_not_take_a_console_cookie_for_a_key(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    browser.post("/console/sign-in", data={"secret": account.test_key})
    answer = browser.get("/v1/verifications")
    assert answer.status_code == 401


def test_an_email_address_is_looked_up_and_listed_masked(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    with server.client(account.test_key) as api:
        created = api.post(
            "/v1/verifications", json={"to": "grace@example.com", "channel": "email"}
        ).json()
    browser.post("/console/sign-in", data={"secret": account.test_key})
    found = browser.get("/console/lookup", params={"q": "grace@EXAMPLE.com"})
    assert found.status_code == 200, found.text
    assert created["id"] in found.text
    assert "grace@example.com" not in found.text
    assert "g••••@example.com" in found.text
    refused = browser.get("/console/lookup", params={"q": "grace@"})
    assert refused.status_code == 400


def test_wrong_keys_are_rate_limited_per_address(browser: httpx.Client) -> None:
    answers = [
        browser.post("/console/sign-in", data={"secret": "sk_test_" + "y" * 32}).status_code
        for _ in range(6)
    ]
    assert 401 in answers
    assert answers[-1] == 429
