"""Console sign-in budgets met from real client addresses (127.0.0.2 ... 127.0.0.15): the
right key or admin token always signs in; only wrong secrets are counted and refused."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from relay.web.console.auth import ADMIN_ATTEMPT_DELAY
from tests.harness import RunningServer, ServerThread, create_account, test_settings, traced

ADMIN_TOKEN = "admin-token-for-the-budget-tests"
GUESSERS = [f"127.0.0.{i}" for i in range(2, 15)]  # thirteen addresses


@pytest.fixture
def serving(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[Any]:
    """A server of each test's own (the prefix and admin budgets are the whole server's),
    the sign-in budgets at their defaults unless the test says otherwise."""
    servers: list[ServerThread] = []

    def start(**settings: Any) -> RunningServer:
        made = ServerThread(
            test_settings(
                tmp_path_factory.mktemp("console"),
                database_url,
                admin_token=ADMIN_TOKEN,
                serve_background=False,
                **settings,
            )
        )
        servers.append(made)
        return made.__enter__()

    yield start
    for made in servers:
        made.__exit__()


def sign_in(server: RunningServer, address: str, secret: str) -> httpx.Response:
    with server.from_address(address) as browser:
        browser.headers["Origin"] = server.loopback_url
        return browser.post("/console/sign-in", data={"secret": secret})


def live_guess() -> str:
    return "sk_live_" + secrets.token_hex(16)


def test_thirteen_addresses_cannot_keep_the_right_live_key_out_of_the_console(
    serving: Any,
) -> None:
    server = serving()
    account = create_account(server.settings)
    per_address = server.settings.console_signin_burst
    tally = Counter(
        sign_in(server, address, live_guess()).status_code
        for address in GUESSERS
        for _ in range(per_address)
    )
    prefix_budget = server.settings.console_signin_prefix_burst
    assert len(GUESSERS) * per_address > prefix_budget
    assert tally == {401: prefix_budget, 429: len(GUESSERS) * per_address - prefix_budget}

    # From a fresh address, and from one over its own budget too: the right key signs in.
    assert sign_in(server, "127.0.0.15", account.live_key).status_code == 303
    assert sign_in(server, GUESSERS[-1], account.live_key).status_code == 303
    # Guesses meanwhile are refused without a key looked up.
    with traced(server.services) as statements:
        refused = sign_in(server, "127.0.0.15", live_guess())
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert not any("key_hash = " in text for text in statements), statements


def test_the_right_key_signs_in_from_an_address_over_its_own_budget(serving: Any) -> None:
    server = serving(console_signin_burst=3)
    account = create_account(server.settings)
    answers = [sign_in(server, "127.0.0.2", f"not-a-key-{i}").status_code for i in range(4)]
    assert answers == [401, 401, 401, 429]
    assert sign_in(server, "127.0.0.2", account.test_key).status_code == 303
    assert sign_in(server, "127.0.0.2", "sk_test_" + "z" * 32).status_code == 429
    assert sign_in(server, "127.0.0.2", ADMIN_TOKEN).status_code == 303


def test_the_right_admin_token_signs_in_while_guesses_are_refused(serving: Any) -> None:
    server = serving(console_admin_failure_burst=4, console_admin_failure_rate=0.01)
    # One wrong token per address: no address spends its own budget.
    first = [sign_in(server, address, f"guess-{address}").status_code for address in GUESSERS[:4]]
    assert first == [401] * 4

    started = time.monotonic()
    refused = sign_in(server, GUESSERS[4], "guess-over-budget")
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    # Every attempt waits before it is compared while the budget is spent.
    assert time.monotonic() - started >= ADMIN_ATTEMPT_DELAY

    assert sign_in(server, GUESSERS[5], ADMIN_TOKEN).status_code == 303
    # Even from an address over its own budget as well.
    for _ in range(server.settings.console_signin_burst):
        sign_in(server, GUESSERS[6], "not-the-token")
    assert sign_in(server, GUESSERS[6], "not-the-token").status_code == 429
    assert sign_in(server, GUESSERS[6], ADMIN_TOKEN).status_code == 303
    # Keys are not admin-token attempts: a wrong key is a plain 401 from a fresh address.
    assert sign_in(server, GUESSERS[7], "sk_test_" + "k" * 32).status_code == 401
