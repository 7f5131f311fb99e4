"""Absolute links in answers never come from a Host header the client made up: an error's
`doc_url` points at `public_url`, at a trusted proxy's Host, or at Relay's own address."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from tests.harness import RunningServer, ServerThread, create_account, test_settings

FORGED = "evil.example"
PUBLIC = "https://relay.example.com"


def port_of(server: RunningServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def doc_urls(server: RunningServer, account: NewAccount, host: str) -> list[str]:
    """The doc_url of refusals made at each layer: the router (no such route), the
    route's own key check, and the edge (a form body). Malformed framing is answered by
    the server in plain text, with no link (decision 0027)."""
    headers = {"Host": host}
    with server.client(None) as anonymous:
        answers = [
            anonymous.get("/v1/no-such-route", headers=headers),
            anonymous.get("/v1/verifications", headers=headers),
        ]
    with server.client(account.test_key) as api:
        answers.append(api.post("/v1/verifications", content=b"to=1", headers={**headers, **FORM}))
    found = [answer.json()["error"]["doc_url"] for answer in answers]
    assert len(found) == 3, found
    return found


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def serving(tmp_path_factory: pytest.TempPathFactory, url: str, **extra: Any) -> ServerThread:
    return ServerThread(test_settings(tmp_path_factory.mktemp("data"), url, **extra))


@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    with serving(tmp_path_factory, database_url, public_url=PUBLIC + "/") as running:
        yield running


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    with serving(tmp_path_factory, database_url, trusted_proxies=["127.0.0.0/8"]) as running:
        yield running


def test_a_forged_host_is_not_linked_to_without_public_url(server: RunningServer) -> None:
    account = create_account(server.settings)
    own = f"https://127.0.0.1:{port_of(server)}/docs/errors#"
    for doc_url in doc_urls(server, account, FORGED):
        assert doc_url.startswith(own), doc_url
        assert FORGED not in doc_url


def test_a_forged_host_with_relays_port_is_not_linked_to_either(server: RunningServer) -> None:
    account = create_account(server.settings)
    for doc_url in doc_urls(server, account, f"{FORGED}:{port_of(server)}"):
        assert doc_url.startswith(f"https://127.0.0.1:{port_of(server)}/docs/errors#"), doc_url


def test_a_host_naming_relays_own_loopback_address_is_kept(server: RunningServer) -> None:
    account = create_account(server.settings)
    host = f"localhost:{port_of(server)}"
    for doc_url in doc_urls(server, account, host):
        assert doc_url.startswith(f"https://{host}/docs/errors#"), doc_url


def test_with_public_url_every_doc_url_is_under_it_whatever_the_host(
    public: RunningServer,
) -> None:
    account = create_account(public.settings)
    for host in (FORGED, f"localhost:{port_of(public)}"):
        for doc_url in doc_urls(public, account, host):
            assert doc_url.startswith(f"{PUBLIC}/docs/errors#"), (host, doc_url)


def test_a_trusted_proxy_passes_on_the_host_its_clients_asked_for(
    proxied: RunningServer,
) -> None:
    account = create_account(proxied.settings)
    for doc_url in doc_urls(proxied, account, "relay.example.net"):
        assert doc_url.startswith("https://relay.example.net/docs/errors#"), doc_url
