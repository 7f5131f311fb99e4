"""Console sessions held on the server: signing out, a key that stops answering and
expiry end them in every process; only failed sign-ins spend the sign-in budgets, and only
wrong secrets are refused once they are spent."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest

from relay.clock import OffsetClock
from relay.services import build_services
from relay.web.console.session import COOKIE
from relay.worker.sweeper import prune_once
from tests.harness import (
    RunningServer,
    ServerThread,
    count_rows,
    create_account,
    every_stored_value,
    run,
    test_settings,
    using_services,
)

ADMIN_TOKEN = "admin-token-for-the-session-tests"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Its own server: a tight sign-in budget, and loopback as a trusted proxy, so each
    test can speak for clients of its own through X-Forwarded-For."""
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        database_url,
        admin_token=ADMIN_TOKEN,
        console_signin_burst=3,
        console_signin_prefix_burst=6,
        trusted_proxies=["127.0.0.1/32"],
    )
    with ServerThread(settings) as running:
        yield running


def browser(server: RunningServer, client: str) -> httpx.Client:
    made = server.client(None)
    made.headers["Origin"] = server.base_url
    made.headers["X-Forwarded-For"] = client
    return made


def signed_in_cookie(server: RunningServer, secret: str, client: str = "198.51.100.1") -> str:
    with browser(server, client) as person:
        answer = person.post("/console/sign-in", data={"secret": secret})
        assert answer.status_code == 303, answer.text
        return str(person.cookies[COOKIE])


def opens_keys_page(server: RunningServer, cookie: str) -> bool:
    with browser(server, "198.51.100.1") as person:
        person.cookies.set(COOKIE, cookie)
        return "Sign out" in person.get("/console/keys").text


def sign_out(server: RunningServer, cookie: str) -> None:
    with browser(server, "198.51.100.1") as person:
        person.cookies.set(COOKIE, cookie)
        found = re.search(r'name="csrf" value="([^"]+)"', person.get("/console/keys").text)
        assert found is not None
        assert person.post("/console/sign-out", data={"csrf": found[1]}).status_code == 200


def test_a_cookie_replayed_after_sign_out_is_refused(server: RunningServer) -> None:
    cookie = signed_in_cookie(server, create_account(server.settings).test_key)
    assert opens_keys_page(server, cookie)
    sign_out(server, cookie)
    assert not opens_keys_page(server, cookie)


def test_signing_out_in_one_process_ends_the_session_in_another(server: RunningServer) -> None:
    cookie = signed_in_cookie(server, create_account(server.settings).test_key)
    with ServerThread(server.settings) as other:
        assert opens_keys_page(other, cookie)
        sign_out(server, cookie)
        assert not opens_keys_page(other, cookie)


def test_an_admin_session_ends_at_sign_out_too(server: RunningServer) -> None:
    cookie = signed_in_cookie(server, ADMIN_TOKEN)
    assert opens_keys_page(server, cookie)
    sign_out(server, cookie)
    assert not opens_keys_page(server, cookie)


def test_a_forged_or_altered_cookie_opens_nothing(server: RunningServer) -> None:
    cookie = signed_in_cookie(server, create_account(server.settings).test_key)
    session_id, _, mac = cookie.partition(".")
    assert not opens_keys_page(server, f"{session_id}x.{mac}")
    assert not opens_keys_page(server, f"{session_id}.{mac[:-2]}")
    assert opens_keys_page(server, cookie)


def test_the_database_keeps_only_a_hash_of_the_session_id(server: RunningServer) -> None:
    cookie = signed_in_cookie(server, create_account(server.settings).test_key)
    session_id = cookie.partition(".")[0]
    stored = [str(value) for value in every_stored_value(server.settings)]
    assert not any(session_id in value for value in stored)
    assert count_rows(server.settings, "SELECT count(*) AS n FROM console_sessions") >= 1


def test_rolling_the_sessions_key_ends_the_session_when_the_overlap_ends(
    server: RunningServer,
) -> None:
    account = create_account(server.settings)
    cookie = signed_in_cookie(server, account.test_key)
    key_id = _key_id(server, account.test_key)

    using_services(server.settings, lambda services: services.accounts.roll_key(key_id, overlap=60))
    assert opens_keys_page(server, cookie)  # the overlap is not over
    server.clock.advance(61)
    assert not opens_keys_page(server, cookie)
    server.clock.offset = timedelta(0)
    # Ended on the server: the key's rolled state is not read again to refuse it.
    assert not opens_keys_page(server, cookie)
    ended = count_rows(
        server.settings,
        "SELECT count(*) AS n FROM console_sessions WHERE key_id = :key AND ended_at IS NOT NULL",
        key=key_id,
    )
    assert ended == 1


def test_revoking_the_sessions_key_ends_the_session_at_the_next_request(
    server: RunningServer,
) -> None:
    account = create_account(server.settings)
    cookie = signed_in_cookie(server, account.test_key)
    key_id = _key_id(server, account.test_key)

    assert opens_keys_page(server, cookie)
    using_services(server.settings, lambda services: services.accounts.revoke_key(key_id))
    assert not opens_keys_page(server, cookie)


def test_expired_sessions_are_refused_and_then_pruned(server: RunningServer) -> None:
    cookie = signed_in_cookie(server, create_account(server.settings).test_key)
    lifetime = server.settings.console_session_seconds
    server.clock.advance(lifetime + 1)
    assert not opens_keys_page(server, cookie)

    async def prune() -> None:
        clock = OffsetClock()
        clock.advance(lifetime + 1)
        services = build_services(server.settings, clock=clock)
        try:
            await prune_once(services)
        finally:
            await services.close()

    run(prune())
    assert count_rows(server.settings, "SELECT count(*) AS n FROM console_sessions") == 0


def test_an_office_behind_one_address_signs_in_as_often_as_it_likes(
    server: RunningServer,
) -> None:
    account = create_account(server.settings)
    with browser(server, "198.51.100.20") as office:
        answers = [
            office.post("/console/sign-in", data={"secret": account.test_key}).status_code
            for _ in range(10)
        ]
    assert answers == [303] * 10


def test_failed_sign_ins_are_limited_per_client_behind_the_proxy(server: RunningServer) -> None:
    account = create_account(server.settings)
    with browser(server, "198.51.100.30") as guesser:
        answers = [
            guesser.post("/console/sign-in", data={"secret": f"not-a-key-{i}"}) for i in range(4)
        ]
        assert [a.status_code for a in answers] == [401, 401, 401, 429]
        assert int(answers[-1].headers["retry-after"]) >= 1
        # Over its budget, a wrong secret is refused and a right one still signs in.
        assert (
            guesser.post("/console/sign-in", data={"secret": account.test_key}).status_code == 303
        )
    with browser(server, "198.51.100.31") as neighbour:
        assert (
            neighbour.post("/console/sign-in", data={"secret": account.test_key}).status_code == 303
        )


def test_a_wrong_admin_token_counts_against_the_address(server: RunningServer) -> None:
    with browser(server, "198.51.100.40") as guesser:
        answers = [
            guesser.post("/console/sign-in", data={"secret": ADMIN_TOKEN + "x"}).status_code
            for _ in range(4)
        ]
    assert answers == [401, 401, 401, 429]


def test_guesses_at_one_key_prefix_spread_over_addresses_are_limited(
    server: RunningServer,
) -> None:
    guesses = [
        _sign_in(server, f"203.0.113.{i}", "sk_live_" + f"{i:02d}" * 16).status_code
        for i in range(7)
    ]
    assert guesses == [401] * 6 + [429]
    # A key of that mode that answers still signs in, from anywhere.
    account = create_account(server.settings)
    assert _sign_in(server, "203.0.113.52", account.live_key).status_code == 303
    # Another prefix, and the admin token, have budgets of their own.
    assert _sign_in(server, "203.0.113.50", "sk_test_" + "z" * 32).status_code == 401
    assert _sign_in(server, "203.0.113.51", ADMIN_TOKEN).status_code == 303


def _sign_in(server: RunningServer, client: str, secret: str) -> httpx.Response:
    with browser(server, client) as person:
        return person.post("/console/sign-in", data={"secret": secret})


def _key_id(server: RunningServer, raw: str) -> str:
    caller = using_services(server.settings, lambda services: services.accounts.authenticate(raw))
    return caller.key_id
