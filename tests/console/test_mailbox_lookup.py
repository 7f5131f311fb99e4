"""The console's look-up by email address: any spelling finds the mailbox's
verifications, and an IDNA domain shows its `xn--` form beside its Unicode one, on the
look-up, the timeline and the verifications list."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.harness import RunningServer, create_account


@pytest.fixture
def owner(server: RunningServer) -> NewAccount:
    return create_account(server.settings)


@pytest.fixture
def browser(server: RunningServer, owner: NewAccount) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        client.headers["Origin"] = server.base_url
        signed_in = client.post("/console/sign-in", data={"secret": owner.test_key})
        assert signed_in.status_code == 303
        yield client


def opened(server: RunningServer, owner: NewAccount, to: str) -> str:
    with server.client(owner.test_key) as api:
        answer = api.post("/v1/verifications", json={"to": to, "channel": "email"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def test_an_idna_domain_shows_its_xn_form_beside_the_unicode_one(
    server: RunningServer, owner: NewAccount, browser: httpx.Client
) -> None:
    made = opened(server, owner, "Ada@Bücher.example")
    shown = "A•••@bücher.example (xn--bcher-kva.example)"
    found = browser.get("/console/lookup", params={"q": "ada@xn--bcher-kva.example"})
    assert found.status_code == 200, found.text
    assert made in found.text
    assert shown in found.text
    assert shown in browser.get(f"/console/timeline/{made}").text
    assert shown in browser.get("/console/verifications").text


def test_an_ascii_domain_is_shown_once(
    server: RunningServer, owner: NewAccount, browser: httpx.Client
) -> None:
    made = opened(server, owner, "grace@ascii.example")
    timeline = browser.get(f"/console/timeline/{made}").text
    assert "g••••@ascii.example<" in timeline


def test_any_spelling_of_an_address_finds_its_mailboxs_verifications(
    server: RunningServer, owner: NewAccount, browser: httpx.Client
) -> None:
    first = opened(server, owner, "Bomb+1@lookup.example")
    with server.client(owner.test_key) as api:
        api.post(f"/v1/verifications/{first}/cancel")
    second = opened(server, owner, "bomb@lookup.example")
    found = browser.get("/console/lookup", params={"q": "BOMB+other@lookup.example"})
    assert found.status_code == 200, found.text
    assert first in found.text
    assert second in found.text
    assert "B•••••@lookup.example" in found.text
    assert "b•••@lookup.example" in found.text
