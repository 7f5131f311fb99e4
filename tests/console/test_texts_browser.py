"""The Account page's own texts in a real headless Chromium (Debian's `chromium`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from tests.console.admin_server import admin_console_server
from tests.harness import RunningServer, create_account

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
ADMIN_TOKEN = "admin-token-for-the-texts-tests"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    yield from admin_console_server(tmp_path_factory, database_url, ADMIN_TOKEN)


@pytest.fixture(scope="module")
def acme(server: RunningServer) -> NewAccount:
    # Made before Playwright starts its loop on this thread.
    return create_account(server.settings, "Acme")


@pytest.fixture(scope="module")
def browser(acme: NewAccount) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, server: RunningServer) -> Iterator[Any]:
    context = browser.new_context(base_url=server.base_url, ignore_https_errors=True)
    yield context.new_page()
    context.close()


def sign_in(page: Any, secret: str) -> None:
    page.goto("/console")
    page.fill("#secret", secret)
    page.click("#sign-in")
    page.goto("/console/account")


def save(page: Any, channel: str, locale: str, text: str) -> None:
    page.select_option("#text-channel", channel)
    page.fill("#text-locale", locale)
    page.fill("#text-text", text)
    page.click("#save-text")


def french_sms(server: RunningServer, account: NewAccount, to: str) -> str:
    def send() -> str:
        with server.client(account.test_key) as api:
            assert api.post("/v1/verifications", json={"to": to}).status_code == 200
        return [sms.body for sms in server.services.sandbox.sent if sms.to == to][-1]

    # On another thread: Playwright's loop runs on this one.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(send).result()


def test_a_live_key_session_saves_a_text_and_the_next_sms_uses_it(
    page: Any, server: RunningServer, acme: NewAccount
) -> None:
    sign_in(page, acme.live_key)
    save(page, "sms", "fr", "{brand} : votre code est {code} ({minutes} min).")
    assert "Saved the sms text for fr." in page.text_content(".notice")
    shown = page.text_content('pre[data-text="sms-fr"]')
    assert shown == "{brand} : votre code est {code} ({minutes} min)."
    body = french_sms(server, acme, "+33612349001")
    assert body.startswith("Acme : votre code est ")
    assert body.endswith(" (10 min).")


def test_a_text_with_an_unknown_placeholder_is_refused_with_the_contracts_error(
    page: Any, acme: NewAccount
) -> None:
    sign_in(page, acme.live_key)
    save(page, "sms", "de", "Code {code} für {user}")
    assert page.text_content("#error-type") == "invalid_request_error"
    assert page.text_content("#error-code") == "parameter_invalid"
    assert page.text_content("#error-param") == "text"
    assert "unknown placeholder {user}" in page.text_content("#error-message")
    page.goto("/console/account")
    assert page.locator('pre[data-text="sms-de"]').count() == 0


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Dein Code: {code}", "the text must hold {brand}"),
        ("{brand} {code} " + "a" * 440, "this text can take 4 SMS segments"),
    ],
)
def test_a_text_without_the_brand_or_past_max_segments_is_refused_with_the_contracts_error(
    page: Any, acme: NewAccount, text: str, said: str
) -> None:
    sign_in(page, acme.live_key)
    save(page, "sms", "de", text)
    assert page.text_content("#error-code") == "parameter_invalid"
    assert page.text_content("#error-param") == "text"
    assert said in page.text_content("#error-message")
    page.goto("/console/account")
    assert page.locator('pre[data-text="sms-de"]').count() == 0


def test_a_two_segment_text_is_saved_with_the_count_in_a_warning(
    page: Any, acme: NewAccount
) -> None:
    sign_in(page, acme.live_key)
    save(page, "sms", "ru", "Ваш код {brand}: {code}. " + "Никому его не сообщайте. " * 3)
    assert "Warning: this text takes 2 SMS segments" in page.text_content(".notice")
    assert page.locator('pre[data-text="sms-ru"]').count() == 1


def test_a_deleted_text_leaves_the_list(page: Any, acme: NewAccount) -> None:
    sign_in(page, acme.live_key)
    save(page, "email", "it", "Il codice {brand} è {code}")
    row = page.locator("#texts ~ table tbody tr", has_text="Il codice {brand} è")
    row.get_by_role("button", name="Delete").click()
    assert "Deleted the email text for it." in page.text_content(".notice")
    assert page.locator('pre[data-text="email-it"]').count() == 0


def test_a_test_key_session_sees_the_texts_and_cannot_change_them(
    page: Any, acme: NewAccount
) -> None:
    sign_in(page, acme.test_key)
    assert page.locator("#texts").is_visible()
    assert page.locator("#set-text").count() == 0
    assert "A live-key or admin session edits them." in page.text_content("main")


def test_an_admin_edits_any_accounts_texts(page: Any, acme: NewAccount) -> None:
    sign_in(page, ADMIN_TOKEN)
    page.goto(f"/console/account?account={acme.id}")
    save(page, "sms", "ja", "{brand}の確認コード：{code}")
    assert "Saved the sms text for ja." in page.text_content(".notice")
    assert page.url.endswith(f"account={acme.id}&done=Saved%20the%20sms%20text%20for%20ja.#texts")
