"""The console's Routes page in a real headless Chromium: per country and carrier the
last hour's figures, and the order a live send takes now with why."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from relay.db.sql import Sql
from relay.services import Services
from tests.harness import (
    RunningServer,
    ServerThread,
    create_account,
    test_settings,
    using_services,
)
from tests.webhooks.receiver import isolated_database

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
ADMIN_TOKEN = "admin-token-for-the-routes-page"
# What an SMSC's undeliverable receipts would have written; live sandboxes deliver all.
UNDELIVERABLE = Sql(
    "UPDATE attempts SET status = 'failed', error = :error WHERE message_id = :message"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "routes_page", tmp_path_factory.mktemp("db"))
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        admin_token=ADMIN_TOKEN,
        carriers={
            "near": {"kind": "sandbox", "prices": {"FR": 0.05}},
            "far": {"kind": "sandbox", "prices": {"default": 0.08}},
            "wa": {"kind": "sandbox", "channel": "whatsapp"},
        },
        routes={
            "FR": {"carriers": ["near", "far"], "strategy": "measured", "min_sample": 2},
            "default": ["far"],
        },
        channel_routes={"whatsapp": ["wa"]},
    )
    with ServerThread(settings) as running:
        yield running


@pytest.fixture(scope="module")
def account(server: RunningServer) -> NewAccount:
    """Three SMS to France through `near`, two of them undeliverable; two verifications to
    the US through `far`, one approved; then two minutes on, when figures are read (the
    scenario may itself cross a minute; its last receipt is then still in the window)."""
    account = create_account(server.settings)
    with server.client(account.live_key) as api:
        sent = [
            api.post("/v1/messages", json={"to": f"+3361234560{n}", "code": "123456"}).json()
            for n in range(3)
        ]
        assert [m["attempts"][0]["carrier"] for m in sent] == ["near"] * 3
        ids = [
            api.post("/v1/verifications", json={"to": f"+1415555012{n}"}).json()["id"]
            for n in (1, 2)
        ]
        code = re.search(r"\d{6}", server.services.sandbox.sent[-2].body)
        assert code is not None
        checked = api.post("/v1/verifications/check", json={"id": ids[0], "code": code.group()})
        assert checked.json()["status"] == "approved"

    async def fail(services: Services) -> None:
        for message in sent[1:]:
            params = {"message": message["id"], "error": {"code": "sms_undeliverable"}}
            await services.db.write(lambda tx, p=params: tx.execute(UNDELIVERABLE, p))

    using_services(server.settings, fail)
    server.clock.advance(120)
    return account


@pytest.fixture(scope="module")
def browser(account: NewAccount) -> Iterator[Any]:
    """After the scenario: Playwright's sync API keeps an event loop running in this thread."""
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


def cells(page: Any, country: str) -> list[list[str]]:
    rows = page.locator(f"#routes-{country} tbody tr")
    return [
        [cell.strip() for cell in rows.nth(i).locator("td").all_text_contents()]
        for i in range(rows.count())
    ]


def test_the_admin_sees_each_countrys_order_now_with_its_reasons_and_figures(
    browser: Any, server: RunningServer, account: NewAccount
) -> None:
    context = browser.new_context(base_url=server.base_url, ignore_https_errors=True)
    page = context.new_page()
    page.goto("/console")
    page.fill("#secret", ADMIN_TOKEN)
    page.click("#sign-in")
    page.click("header >> text=Routes")
    assert page.url.endswith("/console/routes"), page.text_content("body")
    assert "FR · measured" in page.text_content("#route-FR")
    assert cells(page, "FR") == [
        [
            "1",
            "far",
            "fewer than 2 final attempts: configured place",
            "0",
            "n/a",
            "n/a",
            "n/a",
            "n/a",
            "0.08",
        ],
        ["2", "near", "below 80% delivered: last", "3", "33.3%", "0 s", "0 s", "n/a", "0.05"],
    ]
    assert "US · ordered (the default route)" in page.text_content("#route-US")
    assert cells(page, "US") == [
        ["1", "far", "configured order", "2", "100.0%", "0 s", "0 s", "50.0%", "0.08"],
    ]
    assert "whatsapp · ordered" in page.text_content("#route-whatsapp")
    assert [row[:3] for row in cells(page, "whatsapp")] == [["1", "wa", "configured order"]]
    context.close()


def test_a_key_session_is_refused_the_routes_page_and_not_shown_its_link(
    server: RunningServer, account: NewAccount
) -> None:
    with server.client(None) as browser:
        browser.headers["Origin"] = server.base_url
        browser.post("/console/sign-in", data={"secret": account.live_key})
        assert 'href="/console/routes"' not in browser.get("/console/overview").text
        answer = browser.get("/console/routes")
    assert answer.status_code == 403
    assert "admin token" in answer.text
    assert "near" not in answer.text
