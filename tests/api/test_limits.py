"""Send limits that protect the account's money and its users' numbers.

Each limit is shown three ways: the refusal, its Retry-After, and success once
that long has passed on the server's clock.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.cli.main import main as relay
from tests.harness import RunningServer, ServerThread, create_account, test_settings

_numbers = itertools.count(3000)


def fresh_number(prefix: str = "+1415555") -> str:
    return f"{prefix}{next(_numbers):04d}"


def create(api: httpx.Client, to: str) -> httpx.Response:
    return api.post("/v1/verifications", json={"to": to})


def check(api: httpx.Client, verification_id: str, code: str) -> httpx.Response:
    return api.post("/v1/verifications/check", json={"id": verification_id, "code": code})


def refused(response: httpx.Response, code: str) -> int:
    """Assert a 429 with this code and return its Retry-After."""
    assert response.status_code == 429, response.text
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert response.json()["error"]["code"] == code
    return int(response.headers["retry-after"])


def serve(tmp: Path, database_url: str, **overrides: object) -> Iterator[RunningServer]:
    with ServerThread(test_settings(tmp, database_url, **overrides)) as running:
        yield running


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Small caps so each limit is reached in a few requests; test keys get 2x."""
    yield from serve(
        tmp_path_factory.mktemp("tight"),
        database_url,
        number_verifications_per_hour=2,
        test_mode_number_limit_factor=2,
        number_failed_checks_per_day=3,
        daily_sms_cap=8,
        pumping_guard="off",
    )


@pytest.fixture
def tight_account(tight: RunningServer) -> NewAccount:
    tight.clock.offset = timedelta(0)
    return create_account(tight.settings)


@pytest.fixture
def tight_api(tight: RunningServer, tight_account: NewAccount) -> Iterator[httpx.Client]:
    with tight.client(tight_account.test_key) as client:
        yield client


def test_a_number_gets_a_capped_number_of_verifications_an_hour(
    tight_api: httpx.Client, tight: RunningServer
) -> None:
    number = fresh_number()
    for _ in range(4):  # 2 per hour, doubled for a test key
        opened = create(tight_api, number)
        assert opened.status_code == 200
        tight_api.post(f"/v1/verifications/{opened.json()['id']}/cancel")
        tight.clock.advance(60)
    wait = refused(create(tight_api, number), "too_many_verifications")
    assert wait == 3600 - 4 * 60
    tight.clock.advance(wait)
    assert create(tight_api, number).status_code == 200


def test_wrong_codes_are_capped_per_number_across_verifications(
    tight_api: httpx.Client, tight: RunningServer
) -> None:
    number = fresh_number()
    first = create(tight_api, number).json()["id"]
    for _ in range(5):
        check(tight_api, first, "111111")
    second = create(tight_api, number).json()["id"]
    assert check(tight_api, second, "111111").json()["remaining_checks"] == 4
    # Six wrong codes (3, doubled for a test key): even the right one is refused now.
    wait = refused(check(tight_api, second, "000000"), "too_many_failed_checks")
    assert tight_api.get(f"/v1/verifications/{second}").json()["remaining_checks"] == 4
    refused(create(tight_api, number), "too_many_failed_checks")
    assert wait > 23 * 3600
    tight.clock.advance(wait)
    third = create(tight_api, number).json()["id"]
    assert check(tight_api, third, "000000").json()["status"] == "approved"


def test_the_daily_sms_cap_stops_sends_for_the_whole_account(
    tight_api: httpx.Client, tight: RunningServer
) -> None:
    for _ in range(8):
        assert create(tight_api, fresh_number("+1212555")).status_code == 200
    wait = refused(create(tight_api, fresh_number("+1212555")), "daily_cap_reached")
    assert 23 * 3600 < wait <= 24 * 3600
    tight.clock.advance(wait)
    assert create(tight_api, fresh_number("+1212555")).status_code == 200


def test_the_daily_cap_lifts_when_the_clock_hour_of_the_oldest_sends_leaves_the_day(
    tight_api: httpx.Client, tight: RunningServer
) -> None:
    # The account is counted in clock hours: sends made a minute before the hour
    # leave the window with their hour, 23 hours and a minute later.
    now = tight.clock.now()
    next_hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    tight.clock.advance((next_hour - now).total_seconds() - 60)
    for _ in range(8):
        assert create(tight_api, fresh_number("+1212555")).status_code == 200
    wait = refused(create(tight_api, fresh_number("+1212555")), "daily_cap_reached")
    assert 23 * 3600 < wait <= 23 * 3600 + 60
    tight.clock.advance(wait)
    assert create(tight_api, fresh_number("+1212555")).status_code == 200


def test_a_sixth_send_waits_until_the_verification_has_expired(
    tight_api: httpx.Client, tight: RunningServer
) -> None:
    number = fresh_number()
    for _ in range(5):
        assert create(tight_api, number).status_code == 200
        tight.clock.advance(31)
    wait = refused(create(tight_api, number), "max_sends_reached")
    tight.clock.advance(wait)
    assert create(tight_api, number).status_code == 200


def test_an_account_sends_only_to_the_countries_it_allows(
    tight: RunningServer, tight_api: httpx.Client, tight_account: NewAccount
) -> None:
    account_id = tight_account.id
    us_number = fresh_number()
    assert _update(tight, account_id, "CA,fr") == 0
    response = create(tight_api, us_number)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "country_not_allowed"
    assert response.json()["error"]["param"] == "to"
    assert all(sms.to != us_number for sms in tight.services.sandbox.sent)
    assert create(tight_api, "+14165550123").status_code == 200
    assert _update(tight, account_id, "all") == 0
    assert create(tight_api, us_number).status_code == 200


def test_an_unknown_country_code_is_refused_by_the_command(
    tight: RunningServer, tight_account: NewAccount, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _update(tight, tight_account.id, "US,XX") == 1
    assert "XX" in capsys.readouterr().err


def _update(server: RunningServer, account_id: str, countries: str) -> int:
    return relay(
        [
            "accounts",
            "update",
            account_id,
            "--allow-countries",
            countries,
            "--data-dir",
            str(server.settings.data_dir),
            "--database-url",
            server.settings.resolved_database_url,
        ]
    )


# --- The pumping guard ------------------------------------------------------------------

ATTACKED = "+1415556"
GUARD = {
    "pumping_min_sends": 20,
    "pumping_country_min_sends": 1000,
    "rate_limit": 10_000,
    "rate_limit_burst": 10_000,
}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    yield from serve(tmp_path_factory.mktemp("guarded"), database_url, **GUARD)


@pytest.fixture(scope="module")
def shadowed(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> Iterator[RunningServer]:
    yield from serve(
        tmp_path_factory.mktemp("shadowed"), database_url, pumping_guard="shadow", **GUARD
    )


def attack(api: httpx.Client, sends: int) -> list[httpx.Response]:
    """Codes to many numbers of one range, none ever checked: SMS pumping."""
    return [create(api, f"{ATTACKED}{i:04d}") for i in range(sends)]


def test_a_pumping_attack_on_one_prefix_is_blocked_while_other_traffic_flows(
    guarded: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="relay.abuse")
    account: NewAccount = create_account(guarded.settings)
    with guarded.client(account.test_key) as api:
        answers = attack(api, 150)
        assert Counter(r.status_code for r in answers) == {200: 20, 429: 130}
        assert refused(answers[20], "destination_blocked") == 3600
        for _ in range(3):
            normal = create(api, fresh_number("+1212556")).json()
            assert check(api, normal["id"], "000000").json()["status"] == "approved"
        guarded.clock.advance(3600)
        assert create(api, f"{ATTACKED}9999").status_code == 200
    [blocked] = [r for r in caplog.records if r.getMessage() == "pumping.blocked"]
    assert blocked.__dict__["subject"] == "+1415…"
    assert blocked.__dict__["guard"] == "enforce"
    assert ATTACKED not in caplog.text


def test_in_shadow_mode_the_guard_only_logs(
    shadowed: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="relay.abuse")
    with shadowed.client(create_account(shadowed.settings).test_key) as api:
        answers = attack(api, 30)
    assert all(r.status_code == 200 for r in answers)
    logged = [r for r in caplog.records if r.getMessage() == "pumping.blocked"]
    assert len(logged) == 10
    assert {r.__dict__["guard"] for r in logged} == {"shadow"}
