"""`relay serve --workers 2`: signing out in one process ends the session in both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from relay.db.urls import is_postgres
from relay.web.console.session import COOKIE
from tests.e2e.serving import Serving, relay_serve

ADMIN_TOKEN = "admin-token-for-the-serve-workers-test"


def opened(serving: Serving, cookie: str) -> list[bool]:
    """Whether the cookie opens the Keys page, on 20 connections of their own: the
    kernel spreads new connections over both processes."""
    found: list[bool] = []
    for _ in range(20):
        with serving.client() as browser:
            browser.cookies.set(COOKIE, cookie)
            found.append("Sign out" in browser.get("/console/keys").text)
    return found


def test_a_cookie_replayed_after_sign_out_opens_nothing_in_any_process(
    tmp_path: Path, database_url: str
) -> None:
    if not is_postgres(database_url):
        pytest.skip("several processes need PostgreSQL")
    with (
        relay_serve(tmp_path, database_url, workers=2, RELAY_ADMIN_TOKEN=ADMIN_TOKEN) as serving,
        serving.client() as browser,
    ):
        browser.headers["Origin"] = serving.base_url
        assert browser.post("/console/sign-in", data={"secret": ADMIN_TOKEN}).status_code == 303
        cookie = str(browser.cookies[COOKIE])
        assert all(opened(serving, cookie))
        found = re.search(r'name="csrf" value="([^"]+)"', browser.get("/console/keys").text)
        assert found is not None
        assert browser.post("/console/sign-out", data={"csrf": found[1]}).status_code == 200
        assert not any(opened(serving, cookie))
