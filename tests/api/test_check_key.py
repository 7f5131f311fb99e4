"""A check answers about its key what any route answers: the same refusals, in the same
order, under the same limit."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.api.test_auth import UNKNOWN_KEY, assert_401, new_key, raw_client, revoke
from tests.api.test_key_management import (
    ELSEWHERE,
    key_statements,
    manage,
    the_401_of_an_unknown_key,
    the_test_key,
)
from tests.harness import RunningServer, ServerThread, create_account, test_settings

URL = "/v1/verifications"
CHECK = f"{URL}/check"
NUMBER = "+14155552671"
WRONG = "123456"
JSON = {"Content-Type": "application/json"}


def checks_left(api: httpx.Client, verification_id: str) -> int:
    remaining: int = api.get(f"{URL}/{verification_id}").json()["remaining_checks"]
    return remaining


def test_every_kind_of_bad_key_gets_on_a_check_the_401_of_any_route(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    made = api.post(URL, json={"to": NUMBER}).json()
    revoked = create_account(server.settings, "Revoked")
    revoke(server.settings, revoked.id, livemode=False)
    headers = [
        {},
        {"Authorization": "Bearer garbage"},
        {"Authorization": f"Bearer {UNKNOWN_KEY}"},
        {"Authorization": f"Bearer {revoked.test_key}"},
    ]
    for header in headers:
        with raw_client(server, header) as client:
            for body in ({"id": made["id"], "code": WRONG}, {"to": NUMBER, "code": WRONG}):
                refused = client.post(CHECK, json=body)
                assert_401(refused)
                assert refused.json() == the_401_of_an_unknown_key(server)
    assert checks_left(api, made["id"]) == 5


def test_a_revoked_key_checking_by_number_learns_nothing_and_counts_nothing(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    made = api.post(URL, json={"to": NUMBER}).json()
    revoke(server.settings, account.id, livemode=False)
    for code in (WRONG, "000000"):
        assert_401(api.post(CHECK, json={"to": NUMBER, "code": code}))
    with server.client(new_key(server.settings, account.id)) as successor:
        assert checks_left(successor, made["id"]) == 5


def test_a_check_from_outside_the_keys_ranges_is_refused_and_noted(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    made = api.post(URL, json={"to": NUMBER}).json()
    key = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, ELSEWHERE))
    assert_401(api.post(CHECK, json={"id": made["id"], "code": WRONG}))
    noted = the_test_key(server.settings, account)
    assert noted.last_refused_reason == "address 127.0.0.1 outside 10.0.0.0/8"
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, None))
    assert checks_left(api, made["id"]) == 5


def test_a_check_with_a_key_past_its_roll_is_refused(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    made = api.post(URL, json={"to": NUMBER}).json()
    old = the_test_key(server.settings, account)
    rolled = manage(server.settings, lambda accounts: accounts.roll_key(old.id, 10))
    assert api.post(CHECK, json={"id": made["id"], "code": WRONG}).status_code == 200
    server.clock.advance(11)
    assert_401(api.post(CHECK, json={"id": made["id"], "code": WRONG}))
    assert the_test_key(server.settings, account).last_refused_reason == "expired after roll"
    with server.client(rolled.secret) as successor:
        assert checks_left(successor, made["id"]) == 4


def test_a_key_of_another_account_or_mode_finds_no_verification_to_check(
    server: RunningServer, api: httpx.Client, live_api: httpx.Client
) -> None:
    made = api.post(URL, json={"to": NUMBER}).json()
    other = create_account(server.settings, "Other")
    with server.client(other.test_key) as other_api:
        for client in (other_api, live_api):
            for body in ({"id": made["id"], "code": WRONG}, {"to": NUMBER, "code": WRONG}):
                missing = client.post(CHECK, json=body)
                assert missing.status_code == 404, missing.text
                assert missing.json()["error"]["code"] == "resource_missing"
    assert checks_left(api, made["id"]) == 5


@pytest.mark.parametrize(
    ("body", "without_a_key", "with_the_key"),
    [
        (b"{not json", "invalid_json", "invalid_json"),
        (b'{"code": "123456"}', "authentication_failed", "parameter_missing"),
        (
            b'{"id": "ver_x", "to": "+14155552671", "code": "123456"}',
            "authentication_failed",
            "parameter_invalid",
        ),
        (b'{"id": "nope", "code": "123456"}', "authentication_failed", "resource_missing"),
        (b'{"to": "+14155552671"}', "authentication_failed", "parameter_missing"),
    ],
)
def test_a_bad_check_is_refused_in_the_order_of_any_route(
    server: RunningServer,
    account: NewAccount,
    body: bytes,
    without_a_key: str,
    with_the_key: str,
) -> None:
    """An undecodable body before the key, the key before the body's fields."""
    with raw_client(server, {**JSON, "Authorization": f"Bearer {UNKNOWN_KEY}"}) as stranger:
        assert stranger.post(CHECK, content=body).json()["error"]["code"] == without_a_key
    with raw_client(server, {**JSON, "Authorization": f"Bearer {account.test_key}"}) as client:
        refused = client.post(CHECK, content=body)
    assert refused.json()["error"]["code"] == with_the_key, refused.text


def test_a_check_reads_a_key_never_seen_once_and_a_key_seen_before_not_at_all(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    made = api.post(URL, json={"to": NUMBER}).json()
    body = {"id": made["id"], "code": WRONG}
    with server.client(new_key(server.settings, account.id)) as fresh:
        assert key_statements(server, lambda: fresh.post(CHECK, json=body)) == ["SELECT", "UPDATE"]
        assert key_statements(server, lambda: fresh.post(CHECK, json=body)) == []
    assert key_statements(server, lambda: api.post(CHECK, json=body)) == []


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Five requests per key in any five seconds."""
    settings = test_settings(
        tmp_path_factory.mktemp("limited_checks"), database_url, rate_limit=1, rate_limit_burst=5
    )
    with ServerThread(settings) as running:
        yield running


def test_checks_count_against_the_keys_budget_like_any_request(limited: RunningServer) -> None:
    account = create_account(limited.settings)
    with limited.client(account.test_key) as api:
        made = api.post(URL, json={"to": NUMBER}).json()
        answers = [api.post(CHECK, json={"id": made["id"], "code": WRONG}) for _ in range(3)]
        answers.append(api.get(URL))
        answers.append(api.post(CHECK, json={"id": made["id"], "code": WRONG}))
        assert [answer.status_code for answer in answers] == [200, 200, 200, 200, 429]
        error = answers[-1].json()["error"]
        assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limited")
        assert int(answers[-1].headers["retry-after"]) >= 1
        # Refused by the limit before anything else is looked at, the body included.
        undecodable = api.post(CHECK, content=b"{not json", headers=JSON)
        assert undecodable.status_code == 429
        assert api.post(CHECK, json={"code": WRONG}).status_code == 429
        assert api.post(CHECK, json={"to": NUMBER, "code": WRONG}).status_code == 429
    # The budget is the key's: another key of the account sees the refused checks uncounted.
    with limited.client(new_key(limited.settings, account.id)) as successor:
        assert checks_left(successor, made["id"]) == 2


def test_bad_keys_get_401_not_429_on_a_check_too(limited: RunningServer) -> None:
    with limited.client(UNKNOWN_KEY) as stranger:
        answers = {stranger.post(CHECK, json={"to": NUMBER, "code": WRONG}) for _ in range(8)}
    assert {answer.status_code for answer in answers} == {401}
