"""The console in a real headless Chromium (Debian's `chromium`, driven by Playwright).

With RELAY_CONSOLE_SCREENSHOTS=<dir> set, the overview, a timeline and the Keys
page are saved there as PNGs (docs/console.md shows them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from tests.api.test_auth import assert_401
from tests.console.scenario import Scenario, play
from tests.harness import RunningServer, create_account
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    isolated_database,
    wait_until,
    webhook_server,
)

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
ADMIN_TOKEN = "admin-token-for-the-console-tests"
SHOTS = os.environ.get("RELAY_CONSOLE_SCREENSHOTS")
CHARTS = [
    "verifications",
    "conversion",
    "attempts",
    "receipt-time",
    "countries",
    "webhooks",
    "webhook-attempts",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium"),
]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, identity: Identity
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "console", tmp_path_factory.mktemp("db"))
    with webhook_server(
        tmp_path_factory.mktemp("data"),
        url,
        identity,
        webhook_retry_schedule=[],
        admin_token=ADMIN_TOKEN,
        console_signin_burst=50,
        sandbox_slow_delivery=0.2,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def scenario(server: RunningServer, receiver: Receiver) -> Scenario:
    account = create_account(server.settings)
    with server.client(account.test_key) as api:
        return play(server, api, account, receiver)


@pytest.fixture(scope="module")
def browser(scenario: Scenario) -> Iterator[Any]:
    """After the scenario: Playwright's sync API keeps an event loop running in this
    thread, where the scenario's `asyncio.run` could not start another."""
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, server: RunningServer) -> Iterator[Any]:
    context = browser.new_context(
        base_url=server.base_url, ignore_https_errors=True, viewport={"width": 1200, "height": 900}
    )
    yield context.new_page()
    context.close()


def sign_in(page: Any, secret: str) -> None:
    page.goto("/console")
    page.fill("#secret", secret)
    page.click("#sign-in")


def shoot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / name), full_page=True)


def test_a_signed_in_operator_sees_every_chart_drawn_from_the_scenario(
    page: Any, scenario: Scenario
) -> None:
    sign_in(page, scenario.account.test_key)
    p = page
    assert p.url.endswith("/console/overview"), p.text_content("body")
    assert p.text_content("#created") == "12"
    assert p.text_content("#approved") == "4"
    for chart in CHARTS:
        drawn = p.locator(f'svg[data-chart="{chart}"]')
        assert drawn.is_visible(), chart
        marks = drawn.locator("rect.bar, polyline.line")
        heights = [float(marks.nth(i).get_attribute("height") or 1) for i in range(marks.count())]
        assert any(h > 0 for h in heights), f"{chart} draws nothing"
    assert int(p.text_content("#failovers")) >= 1
    shoot(p, "console-overview.png")


def test_a_number_is_looked_up_and_its_timeline_shows_it_masked(
    page: Any, scenario: Scenario
) -> None:
    p = page
    sign_in(p, scenario.account.test_key)
    p.click("text=Look-up")
    p.fill("#q", scenario.looked_up)
    p.click("#find")
    p.click("table a")
    assert "/console/timeline/ver_" in p.url
    text = p.text_content("main")
    assert scenario.looked_up not in text
    assert "•" * 7 + scenario.looked_up[-4:] in text
    assert "sandbox" in text
    assert "verification.approved" in text
    shoot(p, "console-timeline.png")


def test_a_failed_delivery_is_replayed_and_the_receiver_gets_it(
    page: Any, scenario: Scenario, receiver: Receiver
) -> None:
    p = page
    sign_in(p, scenario.account.test_key)
    p.goto(f"/console/timeline/{scenario.replayable}")
    section = p.locator("section.event").first
    event_id = section.get_attribute("data-event")
    assert section.locator(".delivery-status").text_content() == "dropped"
    # The receiver's own answer, shown with its attempt.
    assert "refused by the test receiver" in (section.text_content() or "")
    assert len(receiver.for_event(event_id)) == 1
    section.locator("button", has_text="Replay delivery").click()
    assert "HTTP 200" in p.text_content("[role=status]")
    wait_until(lambda: len(receiver.for_event(event_id)) == 2, what="the replayed delivery")
    assert p.locator("section.event .delivery-status").first.text_content() == "delivered"


def test_signing_out_ends_the_session(page: Any, scenario: Scenario) -> None:
    p = page
    sign_in(p, scenario.account.test_key)
    p.click("#sign-out")
    p.goto("/console/overview")
    assert p.locator("#secret").is_visible()


def test_a_wrong_key_is_refused(page: Any, scenario: Scenario) -> None:
    p = page
    sign_in(p, "sk_test_" + "x" * 32)
    assert "not accepted" in p.text_content("[role=alert]")
    assert p.locator("#secret").is_visible()


def test_an_expired_session_is_sent_back_to_sign_in(
    page: Any, scenario: Scenario, server: RunningServer
) -> None:
    p = page
    sign_in(p, scenario.account.test_key)
    server.clock.offset = timedelta(seconds=server.settings.console_session_seconds + 1)
    p.goto("/console/overview")
    assert p.locator("#secret").is_visible()


def test_a_forged_csrf_token_is_refused(page: Any, scenario: Scenario) -> None:
    p = page
    sign_in(p, scenario.account.test_key)
    answer = p.request.post(
        "/console/actions/roll-secret",
        form={"csrf": "forged", "account_id": scenario.account.id},
        headers={"Origin": p.url.split("/console")[0]},
    )
    assert answer.status == 403


def test_an_admin_token_sees_every_account(page: Any, scenario: Scenario) -> None:
    p = page
    other: NewAccount = scenario.account
    sign_in(p, ADMIN_TOKEN)
    assert "admin" in p.text_content("header")
    assert int(p.text_content("#created")) >= 12
    p.goto(f"/console/verifications?account={other.id}&mode=test")
    assert p.locator("table tbody tr").count() == 12


def fresh_account(server: RunningServer, name: str) -> NewAccount:
    """An account of the test's own, made on another thread: Playwright's loop runs on this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(create_account, server.settings, name).result()


def keys_page(account: NewAccount) -> str:
    return f"/console/keys?account={account.id}"


def create_key_on_the_page(p: Any, account: NewAccount, networks: str = "") -> str:
    """A test key for `account`, made on an admin session's Keys page."""
    p.goto(keys_page(account))
    p.fill("#new-networks", networks)
    p.click("#create-key")
    secret: str = p.text_content("#new-secret")
    p.goto(keys_page(account))
    assert p.locator("#new-secret").count() == 0, "a secret is shown once"
    assert secret not in p.content()
    return secret


def key_row(p: Any, secret: str) -> Any:
    return p.locator("#keys tbody tr", has_text="…" + secret[-4:])


def answer_of(server: RunningServer, secret: str) -> Any:
    with server.client(secret) as api:
        return api.get("/v1/verifications")


def test_a_rolled_key_and_its_successor_both_work_until_the_overlap_ends(
    page: Any, server: RunningServer
) -> None:
    p = page
    account = fresh_account(server, "Keys roll")
    sign_in(p, ADMIN_TOKEN)
    old = create_key_on_the_page(p, account)
    row = key_row(p, old)
    row.locator("input[name=overlap]").fill("60")
    row.locator("select[name=unit]").select_option("seconds")
    row.locator("button", has_text="Roll").click()
    new = p.text_content("#new-secret")
    assert new.startswith("sk_test_")
    assert new != old
    p.goto(keys_page(account))
    assert key_row(p, old).locator(".state").text_content().startswith("rolling until ")
    assert answer_of(server, old).status_code == 200
    assert answer_of(server, new).status_code == 200
    server.clock.offset += timedelta(seconds=61)
    assert_401(answer_of(server, old))
    assert answer_of(server, new).status_code == 200
    p.goto(keys_page(account))
    assert key_row(p, old).locator(".state").text_content() == "expired"
    assert "expired after roll" in key_row(p, old).locator(".refused").text_content()
    assert key_row(p, new).locator(".state").text_content() == "active"


def test_a_key_restricted_away_from_the_client_is_refused_and_the_page_says_why(
    page: Any, server: RunningServer
) -> None:
    p = page
    account = fresh_account(server, "Keys restrict")
    sign_in(p, ADMIN_TOKEN)
    secret = create_key_on_the_page(p, account)
    assert answer_of(server, secret).status_code == 200
    row = key_row(p, secret)
    row.locator("input[name=networks]").fill("10.0.0.0/8")
    row.locator("button", has_text="Restrict").click()
    assert "10.0.0.0/8" in p.text_content("[role=status]")
    assert_401(answer_of(server, secret))
    p.goto(keys_page(account))
    row = key_row(p, secret)
    assert row.locator(".networks").text_content() == "10.0.0.0/8"
    assert "address 127.0.0.1 outside 10.0.0.0/8" in row.locator(".refused").text_content()
    shoot(p, "console-keys.png")
    row.locator("button", has_text="Lift restriction").click()
    assert key_row(p, secret).locator(".networks").text_content() == "any"
    assert answer_of(server, secret).status_code == 200


def test_a_revoked_key_is_refused_at_once(page: Any, server: RunningServer) -> None:
    p = page
    account = fresh_account(server, "Keys revoke")
    sign_in(p, ADMIN_TOKEN)
    secret = create_key_on_the_page(p, account)
    assert answer_of(server, secret).status_code == 200
    key_row(p, secret).locator("button", has_text="Revoke").click()
    assert "revoked" in p.text_content("[role=status]")
    assert_401(answer_of(server, secret))
    p.reload()
    assert key_row(p, secret).locator(".state").text_content() == "revoked"
    assert "revoked" in key_row(p, secret).locator(".refused").text_content()
