"""One mailbox, one destination: the spellings of an email address (its case, a `+tag`,
its domain in Unicode or `xn--`) share the resend interval, the one pending
verification, the hourly cap and the wrong codes; each email still goes to the
address as given."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.harness import RunningServer, ServerThread, create_account, test_settings
from tests.webhooks.receiver import isolated_database


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Caps small enough to reach: 2 verifications an hour and 3 wrong codes a day per
    destination, doubled for test keys."""
    url = isolated_database(database_url, "one_mailbox", tmp_path_factory.mktemp("db"))
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        number_verifications_per_hour=2,
        test_mode_number_limit_factor=2,
        number_failed_checks_per_day=3,
        pumping_guard="off",
    )
    with ServerThread(settings) as running:
        yield running


@pytest.fixture
def account(server: RunningServer) -> NewAccount:
    server.clock.offset = timedelta(0)
    return create_account(server.settings)


@pytest.fixture
def api(server: RunningServer, account: NewAccount) -> Iterator[httpx.Client]:
    with server.client(account.test_key) as client:
        yield client


def create(api: httpx.Client, to: str) -> httpx.Response:
    return api.post("/v1/verifications", json={"to": to, "channel": "email"})


def opened(api: httpx.Client, to: str) -> dict[str, Any]:
    answer = create(api, to)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def refused(answer: httpx.Response, code: str) -> int:
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"]["code"] == code
    return int(answer.headers["retry-after"])


def recipients(server: RunningServer, domain: str) -> list[str]:
    """Where the sandbox's emails to `domain` went, oldest first."""
    return [sms.to for sms in server.services.sandbox.sent if sms.to.endswith("@" + domain)]


def test_a_resend_to_the_same_mailbox_in_other_case_waits_the_resend_interval(
    api: httpx.Client, server: RunningServer
) -> None:
    first = opened(api, "bomb@case.example")
    wait = refused(create(api, "BOMB@case.example"), "resend_too_soon")
    assert wait == 30
    server.clock.advance(30)
    again = opened(api, "Bomb@Case.Example")
    assert again["id"] == first["id"]
    assert len(again["attempts"]) == 2


def test_a_plus_tag_does_not_open_a_second_pending_verification(
    api: httpx.Client, server: RunningServer
) -> None:
    first = opened(api, "bomb@tag.example")
    refused(create(api, "bomb+1@tag.example"), "resend_too_soon")
    refused(create(api, "BOMB+2@tag.example"), "resend_too_soon")
    pending = api.get("/v1/verifications", params={"status": "pending"}).json()["data"]
    assert [v["id"] for v in pending] == [first["id"]]
    assert recipients(server, "tag.example") == ["bomb@tag.example"]


def test_verifications_per_hour_count_one_mailbox_across_its_spellings(
    api: httpx.Client, server: RunningServer
) -> None:
    spellings = [
        "bomb@hour.example",
        "BOMB@hour.example",
        "bomb+a@hour.example",
        "Bomb+b@hour.example",
    ]
    for spelling in spellings:  # 2 an hour, doubled for a test key
        made = opened(api, spelling)
        api.post(f"/v1/verifications/{made['id']}/cancel")
        server.clock.advance(60)
    wait = refused(create(api, "bomb+c@HOUR.example"), "too_many_verifications")
    assert wait == 3600 - 4 * 60
    # Another mailbox at the same domain has its own count.
    assert create(api, "other@hour.example").status_code == 200
    server.clock.advance(wait)
    assert create(api, "bomb+c@hour.example").status_code == 200


def test_wrong_codes_count_per_mailbox(api: httpx.Client, server: RunningServer) -> None:
    first = opened(api, "guess@wrong.example")["id"]
    for _ in range(5):
        api.post("/v1/verifications/check", json={"id": first, "code": "111111"})
    second = opened(api, "GUESS+x@wrong.example")["id"]
    assert second != first
    checked = api.post(
        "/v1/verifications/check", json={"to": "guess@wrong.example", "code": "111111"}
    )
    assert checked.json()["remaining_checks"] == 4
    # Six wrong codes (3, doubled for a test key) across two spellings: the mailbox is
    # refused, the right code too, in any spelling.
    right = {"to": "Guess+y@wrong.example", "code": "000000"}
    wait = refused(api.post("/v1/verifications/check", json=right), "too_many_failed_checks")
    refused(create(api, "guess+z@wrong.example"), "too_many_failed_checks")
    assert wait > 23 * 3600
    server.clock.advance(wait)
    third = opened(api, "guess@wrong.example")["id"]
    approved = api.post("/v1/verifications/check", json=right).json()
    assert (approved["id"], approved["status"]) == (third, "approved")


def test_the_email_goes_to_the_address_as_given(api: httpx.Client, server: RunningServer) -> None:
    made = opened(api, "Ada.Lovelace+Signup@Given.Example")
    assert made["to"] == "Ada.Lovelace+Signup@given.example"
    assert recipients(server, "given.example") == ["Ada.Lovelace+Signup@given.example"]


def test_a_resend_by_another_spelling_goes_where_the_code_went_first(
    api: httpx.Client, server: RunningServer
) -> None:
    first = opened(api, "ada+shop@first.example")
    server.clock.advance(30)
    again = opened(api, "ADA@first.example")
    assert again["id"] == first["id"]
    assert again["to"] == "ada+shop@first.example"
    assert recipients(server, "first.example") == ["ada+shop@first.example"] * 2


def test_a_check_by_to_in_any_spelling_finds_the_mailboxs_pending_verification(
    api: httpx.Client,
) -> None:
    made = opened(api, "bomb@check.example")
    checked = api.post(
        "/v1/verifications/check", json={"to": "BOMB+login@Check.Example", "code": "000000"}
    )
    assert checked.status_code == 200, checked.text
    assert (checked.json()["id"], checked.json()["status"]) == (made["id"], "approved")
    assert checked.json()["to"] == "bomb@check.example"


def test_the_list_filter_to_finds_every_spelling_of_the_mailbox(
    api: httpx.Client, server: RunningServer
) -> None:
    first = opened(api, "Bomb+1@list.example")
    api.post(f"/v1/verifications/{first['id']}/cancel")
    second = opened(api, "bomb@list.example")
    opened(api, "someone@list.example")
    listed = api.get("/v1/verifications", params={"to": "BOMB+anything@list.example"}).json()
    assert [(v["id"], v["to"]) for v in listed["data"]] == [
        (second["id"], "bomb@list.example"),
        (first["id"], "Bomb+1@list.example"),
    ]


def test_an_idna_domain_is_one_mailbox_in_unicode_and_in_its_xn_form(
    api: httpx.Client, server: RunningServer
) -> None:
    first = opened(api, "bomb@bücher.example")
    refused(create(api, "Bomb@xn--bcher-kva.example"), "resend_too_soon")
    refused(create(api, "bomb@BÜCHER.example"), "resend_too_soon")
    assert first["to"] == "bomb@bücher.example"


def test_phone_numbers_keep_their_own_destinations(api: httpx.Client) -> None:
    first = api.post("/v1/verifications", json={"to": "+14155550188"}).json()
    other = api.post("/v1/verifications", json={"to": "+14155550189"}).json()
    assert first["id"] != other["id"]
    assert (first["to"], other["to"]) == ("+14155550188", "+14155550189")
