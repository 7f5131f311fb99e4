"""Erasing from the look-up page: an admin session erases a destination with the console's
CSRF token and sees the counts; a key session is offered nothing and refused."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.console.admin_server import admin_console_server
from tests.harness import RunningServer, create_account

ADMIN_TOKEN = "admin-token-for-the-erasure-page-tests"
_numbers = itertools.count(100)


def fresh_number() -> str:
    return f"+1415559{next(_numbers) % 10000:04d}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    yield from admin_console_server(tmp_path_factory, database_url, ADMIN_TOKEN)


@pytest.fixture
def owner(server: RunningServer) -> NewAccount:
    return create_account(server.settings)


@pytest.fixture
def browser(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        client.headers["Origin"] = server.base_url
        yield client


def sign_in(browser: httpx.Client, secret: str) -> None:
    assert browser.post("/console/sign-in", data={"secret": secret}).status_code == 303


def csrf_of(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None, text
    return found.group(1)


def verification_to(server: RunningServer, owner: NewAccount, to: str) -> str:
    with server.client(owner.test_key) as api:
        made = api.post("/v1/verifications", json={"to": to})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def still_there(server: RunningServer, owner: NewAccount, verification_id: str) -> bool:
    with server.client(owner.test_key) as api:
        return api.get(f"/v1/verifications/{verification_id}").status_code == 200


def test_an_admin_erases_a_destination_from_its_look_up_and_sees_the_counts(
    server: RunningServer, owner: NewAccount, browser: httpx.Client
) -> None:
    to = fresh_number()
    made = verification_to(server, owner, to)
    sign_in(browser, ADMIN_TOKEN)
    found = browser.get("/console/lookup", params={"q": to})
    assert "Erase everything naming this destination" in found.text

    erased = browser.post(
        "/console/actions/erase",
        data={"csrf": csrf_of(found.text), "to": to, "account": "", "mode": ""},
    )

    assert erased.status_code == 200, erased.text
    assert f"Erased {to[:5]}…{to[-2:]}." in erased.text
    assert "<td>verifications</td><td>1</td>" in erased.text
    assert to not in erased.text
    assert not still_there(server, owner, made)


def test_a_forged_token_erases_nothing(
    server: RunningServer, owner: NewAccount, browser: httpx.Client
) -> None:
    to = fresh_number()
    made = verification_to(server, owner, to)
    sign_in(browser, ADMIN_TOKEN)
    refused = browser.post(
        "/console/actions/erase", data={"csrf": "forged", "to": to, "account": "", "mode": ""}
    )
    assert refused.status_code == 403
    assert still_there(server, owner, made)


def test_a_key_session_is_offered_no_erasure_and_refused_one(
    server: RunningServer, owner: NewAccount, browser: httpx.Client
) -> None:
    to = fresh_number()
    made = verification_to(server, owner, to)
    sign_in(browser, owner.test_key)
    found = browser.get("/console/lookup", params={"q": to})
    assert made in found.text
    assert "Erase everything" not in found.text

    refused = browser.post(
        "/console/actions/erase",
        data={"csrf": csrf_of(found.text), "to": to, "account": "", "mode": ""},
    )
    assert refused.status_code == 403
    assert still_there(server, owner, made)
