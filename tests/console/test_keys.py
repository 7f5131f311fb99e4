"""The Keys page over plain HTTPS: who may act on which key, and refusals in the page's shape."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from relay.accounts import key_store
from relay.accounts.models import ApiKey, NewAccount
from tests.harness import RunningServer, ServerThread, create_account, read_db, test_settings

ADMIN_TOKEN = "admin-token-for-the-keys-page-tests"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        database_url,
        admin_token=ADMIN_TOKEN,
        console_signin_burst=50,
    )
    with ServerThread(settings) as running:
        yield running


@pytest.fixture
def browser(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        client.headers["Origin"] = server.base_url
        yield client


def signed_in(browser: httpx.Client, secret: str) -> str:
    """Signs in and answers the session's CSRF token, read from the Keys page."""
    assert browser.post("/console/sign-in", data={"secret": secret}).status_code == 303
    keys = browser.get("/console/keys")
    found = re.search(r'name="csrf" value="([^"]+)"', keys.text)
    assert found is not None, keys.text
    return found.group(1)


def key_of(server: RunningServer, key_id: str) -> ApiKey:
    """The key as stored, read on a connection of the test's own."""
    found = read_db(server.settings, lambda tx: key_store.key(tx, key_id, now=datetime.now(UTC)))
    assert found is not None
    return found


def key_id_of(server: RunningServer, account: NewAccount, livemode: bool = False) -> str:
    keys = read_db(
        server.settings, lambda tx: key_store.list_keys(tx, account.id, now=datetime.now(UTC))
    )
    return next(k.id for k in keys if k.livemode == livemode)


def test_a_key_session_lists_its_own_mode_only_and_never_a_secret(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    signed_in(browser, account.test_key)
    text = browser.get("/console/keys").text
    assert "sk_test_…" + account.test_key[-4:] in text
    assert "sk_live_" not in text
    assert account.test_key not in text


def test_a_forged_token_revokes_nothing(server: RunningServer, browser: httpx.Client) -> None:
    account = create_account(server.settings)
    signed_in(browser, account.test_key)
    key_id = key_id_of(server, account)
    answer = browser.post("/console/keys/revoke", data={"csrf": "forged", "key_id": key_id})
    assert answer.status_code == 403
    assert key_of(server, key_id).state == "active"


def test_another_accounts_key_is_no_key_at_all(
    server: RunningServer, browser: httpx.Client
) -> None:
    mine, theirs = create_account(server.settings), create_account(server.settings)
    csrf = signed_in(browser, mine.test_key)
    for key_id in (key_id_of(server, theirs), key_id_of(server, mine, livemode=True)):
        answer = browser.post("/console/keys/revoke", data={"csrf": csrf, "key_id": key_id})
        assert answer.status_code == 404
        assert f"No key {key_id}." in answer.text
        assert key_of(server, key_id).state == "active"


def test_an_overlap_past_a_day_or_not_a_number_is_refused_with_a_page(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, account.test_key)
    key_id = key_id_of(server, account)
    for overlap, unit in (("25", "hours"), ("soon", "hours"), ("60", "fortnights")):
        answer = browser.post(
            "/console/keys/roll",
            data={"csrf": csrf, "key_id": key_id, "overlap": overlap, "unit": unit},
        )
        assert answer.status_code == 400, (overlap, unit)
        assert 'role="alert"' in answer.text
    assert key_of(server, key_id).state == "active"


def test_a_bad_range_is_refused_and_the_key_left_as_it_was(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, account.test_key)
    key_id = key_id_of(server, account)
    answer = browser.post(
        "/console/keys/restrict", data={"csrf": csrf, "key_id": key_id, "networks": "10.0.0.1/8"}
    )
    assert answer.status_code == 400
    assert "host bits" in answer.text
    assert key_of(server, key_id).networks is None


def test_revoking_the_sessions_own_key_ends_the_session(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, account.test_key)
    key_id = key_id_of(server, account)
    answer = browser.post("/console/keys/revoke", data={"csrf": csrf, "key_id": key_id})
    assert answer.status_code == 200
    assert "session ends" in answer.text
    assert 'id="secret"' in browser.get("/console/keys").text


def test_restricting_the_sessions_own_key_away_from_it_ends_the_session(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, account.test_key)
    key_id = key_id_of(server, account)
    browser.post(
        "/console/keys/restrict", data={"csrf": csrf, "key_id": key_id, "networks": "10.0.0.0/8"}
    )
    assert 'id="secret"' in browser.get("/console/keys").text
    refused = browser.post("/console/sign-in", data={"secret": account.test_key})
    assert refused.status_code == 401


def test_an_admin_creates_a_live_key_for_a_chosen_account(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, ADMIN_TOKEN)
    listed = browser.get(f"/console/keys?account={account.id}").text
    assert "sk_test_…" in listed
    assert "sk_live_…" in listed
    made = browser.post(
        "/console/keys/create", data={"csrf": csrf, "account_id": account.id, "mode": "live"}
    )
    assert made.status_code == 200
    secret = re.search(r'id="new-secret">([^<]+)<', made.text)
    assert secret is not None
    with server.client(secret.group(1)) as api:
        assert api.get("/v1/verifications").status_code == 200
