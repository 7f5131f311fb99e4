"""The Keys page over plain HTTPS: who may act on which key, and refusals in the page's shape."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from relay.accounts import key_store
from relay.accounts.models import ApiKey, NewAccount
from tests.console.admin_server import admin_console_server
from tests.harness import RunningServer, create_account, read_db

ADMIN_TOKEN = "admin-token-for-the-keys-page-tests"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    yield from admin_console_server(tmp_path_factory, database_url, ADMIN_TOKEN)


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


def keys_of(server: RunningServer, account: NewAccount) -> list[ApiKey]:
    return read_db(
        server.settings, lambda tx: key_store.list_keys(tx, account.id, now=datetime.now(UTC))
    )


def key_id_of(server: RunningServer, account: NewAccount, livemode: bool = False) -> str:
    """The account's first key in that mode (the one it was created with)."""
    keys = sorted(keys_of(server, account), key=lambda k: k.created_at)
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


def admin_made_key(server: RunningServer, account: NewAccount, live: bool = False) -> str:
    """A second key for `account`, created by an admin session of its own; its id."""
    with server.client(None) as admin:
        admin.headers["Origin"] = server.base_url
        csrf = signed_in(admin, ADMIN_TOKEN)
        mode = "live" if live else "test"
        made = admin.post(
            "/console/keys/create", data={"csrf": csrf, "account_id": account.id, "mode": mode}
        )
    assert made.status_code == 200, made.text
    found = re.search(r'class="key-line">[^<]*?(key_[0-9A-Za-z]+)', made.text)
    assert found is not None
    return found.group(1)


def assert_refused_unchanged(
    server: RunningServer, answer: httpx.Response, key_id: str, networks: str | None = None
) -> None:
    assert answer.status_code == 403, answer.text
    assert 'role="alert"' in answer.text
    assert "needs an admin session" in answer.text or "Roll it from an admin session" in answer.text
    assert 'id="new-secret"' not in answer.text
    stored = key_of(server, key_id)
    assert stored.state == "active"
    assert stored.networks == (None if networks is None else (networks,))


def test_a_key_session_cannot_revoke_roll_or_restrict_another_key_of_its_own_account(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    other = admin_made_key(server, account)
    csrf = signed_in(browser, account.test_key)
    forged = {
        "revoke": {},
        "roll": {"overlap": "0", "unit": "hours"},
        "restrict": {"networks": "10.0.0.0/8"},
    }
    for action, fields in forged.items():
        answer = browser.post(
            f"/console/keys/{action}", data={"csrf": csrf, "key_id": other, **fields}
        )
        assert_refused_unchanged(server, answer, other)
    with server.client(account.test_key) as api:
        assert api.get("/v1/verifications").status_code == 200


def test_a_key_session_cannot_act_on_another_accounts_key_or_its_other_mode(
    server: RunningServer, browser: httpx.Client
) -> None:
    mine, theirs = create_account(server.settings), create_account(server.settings)
    csrf = signed_in(browser, mine.test_key)
    for key_id in (key_id_of(server, theirs), key_id_of(server, mine, livemode=True)):
        answer = browser.post("/console/keys/revoke", data={"csrf": csrf, "key_id": key_id})
        assert_refused_unchanged(server, answer, key_id)


def test_a_key_session_cannot_create_a_key(server: RunningServer, browser: httpx.Client) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, account.test_key)
    page_text = browser.get("/console/keys").text
    assert 'action="/console/keys/create"' not in page_text
    before = len(keys_of(server, account))
    for mode in ("test", "live"):
        answer = browser.post(
            "/console/keys/create", data={"csrf": csrf, "account_id": account.id, "mode": mode}
        )
        assert answer.status_code == 403
        assert "needs an admin session" in answer.text
        assert 'id="new-secret"' not in answer.text
    assert len(keys_of(server, account)) == before


def test_a_key_session_shows_forms_for_its_own_key_only(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    other = admin_made_key(server, account)
    signed_in(browser, account.test_key)
    own = key_id_of(server, account)
    text = browser.get("/console/keys").text
    rows = dict(re.findall(r'<tr data-key="(key_[^"]+)">(.*?)</tr>', text))
    assert set(rows) >= {own, other}
    assert 'action="/console/keys/revoke"' in rows[own]
    assert 'action="/console/keys/restrict"' in rows[own]
    assert 'action="/console/keys/roll"' not in rows[own]
    assert "<form" not in rows[other]
    assert "read-only" in rows[other]


@pytest.mark.parametrize("live", [False, True])
def test_a_key_session_cannot_roll_its_own_key_even_with_no_overlap(
    server: RunningServer, browser: httpx.Client, live: bool
) -> None:
    account = create_account(server.settings)
    secret = account.live_key if live else account.test_key
    csrf = signed_in(browser, secret)
    key_id = key_id_of(server, account, livemode=live)
    before = len(keys_of(server, account))
    for overlap, unit in (("0", "seconds"), ("24", "hours")):
        answer = browser.post(
            "/console/keys/roll",
            data={"csrf": csrf, "key_id": key_id, "overlap": overlap, "unit": unit},
        )
        assert_refused_unchanged(server, answer, key_id)
        assert "rolls no key, not even its own" in answer.text
    assert len(keys_of(server, account)) == before
    with server.client(secret) as api:
        assert api.get("/v1/verifications").status_code == 200


def test_a_key_session_narrows_its_own_keys_ranges_but_never_widens_or_lifts_them(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    key_id = key_id_of(server, account)
    restricted = using_admin(server, "restrict", key_id, networks="127.0.0.0/8")
    assert restricted.status_code == 303
    csrf = signed_in(browser, account.test_key)
    rows = dict(
        re.findall(r'<tr data-key="(key_[^"]+)">(.*?)</tr>', browser.get("/console/keys").text)
    )
    assert "Lift restriction" not in rows[key_id]
    for wider in ("any", "0.0.0.0/0", "127.0.0.0/8, 10.0.0.0/8", "::1/128"):
        answer = browser.post(
            "/console/keys/restrict", data={"csrf": csrf, "key_id": key_id, "networks": wider}
        )
        assert_refused_unchanged(server, answer, key_id, networks="127.0.0.0/8")
        assert "may only narrow" in answer.text
    narrowed = browser.post(
        "/console/keys/restrict",
        data={"csrf": csrf, "key_id": key_id, "networks": "127.0.0.0/16"},
    )
    assert narrowed.status_code == 303, narrowed.text
    assert key_of(server, key_id).networks == ("127.0.0.0/16",)


def using_admin(server: RunningServer, action: str, key_id: str, **fields: str) -> httpx.Response:
    """`action` on `key_id` from an admin session of its own."""
    with server.client(None) as admin:
        admin.headers["Origin"] = server.base_url
        csrf = signed_in(admin, ADMIN_TOKEN)
        return admin.post(
            f"/console/keys/{action}", data={"csrf": csrf, "key_id": key_id, **fields}
        )


def test_an_overlap_past_a_day_or_not_a_number_is_refused_with_a_page(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    csrf = signed_in(browser, ADMIN_TOKEN)
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


def test_an_admin_session_rolls_restricts_and_revokes_any_accounts_keys(
    server: RunningServer, browser: httpx.Client
) -> None:
    account = create_account(server.settings)
    test_key, live_key = key_id_of(server, account), key_id_of(server, account, livemode=True)
    csrf = signed_in(browser, ADMIN_TOKEN)
    listed = browser.get(f"/console/keys?account={account.id}").text
    assert 'action="/console/keys/create"' in listed
    restricted = browser.post(
        "/console/keys/restrict",
        data={"csrf": csrf, "key_id": live_key, "networks": "10.0.0.0/8"},
    )
    assert restricted.status_code == 303
    assert key_of(server, live_key).networks == ("10.0.0.0/8",)
    rolled = browser.post(
        "/console/keys/roll",
        data={"csrf": csrf, "key_id": test_key, "overlap": "0", "unit": "seconds"},
    )
    assert rolled.status_code == 200, rolled.text
    assert key_of(server, test_key).state in ("rolling", "expired")
    revoked = browser.post("/console/keys/revoke", data={"csrf": csrf, "key_id": live_key})
    assert revoked.status_code == 303
    assert key_of(server, live_key).state == "revoked"
