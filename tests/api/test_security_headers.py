"""Strict-Transport-Security on every HTTPS answer, and the console's page headers on
the docs pages: decided at the edge, whatever route answers."""

from __future__ import annotations

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.harness import RunningServer, ServerThread, test_settings

PAGE_HEADERS = (
    "content-security-policy",
    "x-content-type-options",
    "referrer-policy",
    "cache-control",
    "x-frame-options",
)


def answers(server: RunningServer, key: str | None) -> list[httpx.Response]:
    """An API answer, a refusal, a missing route, the console and the docs."""
    with server.client(key) as made:
        return [
            made.get("/v1/verifications"),
            made.get("/v1/verifications/ver_missing"),
            made.get("/v1/nowhere"),
            made.post("/v1/verifications", content=b"{", headers={"Content-Type": "text/plain"}),
            made.get("/healthz"),
            made.get("/console"),
            made.get("/console/static/console.css"),
            made.get("/docs"),
            made.get("/docs/errors"),
        ]


def test_every_https_answer_carries_strict_transport_security(
    server: RunningServer, account: NewAccount
) -> None:
    for answer in [*answers(server, account.test_key), *answers(server, None)]:
        hsts = answer.headers.get("strict-transport-security")
        assert hsts == "max-age=31536000", (answer.request.url, answer.status_code)


def test_the_docs_pages_send_the_consoles_security_headers(server: RunningServer) -> None:
    with server.client(None) as browser:
        console = browser.get("/console")
        for path in ("/docs", "/docs/errors"):
            docs = browser.get(path)
            assert docs.status_code == 200
            for name in PAGE_HEADERS:
                assert docs.headers.get(name) == console.headers[name], (path, name)
            assert "<style" not in docs.text  # the policy allows no inline style


def test_each_page_header_is_sent_once(server: RunningServer) -> None:
    with server.client(None) as browser:
        for path in ("/console", "/docs"):
            headers = browser.get(path).headers
            for name in PAGE_HEADERS:
                assert len(headers.get_list(name)) == 1, (path, name)


def test_the_stylesheet_keeps_its_own_cache_lifetime(server: RunningServer) -> None:
    with server.client(None) as browser:
        assert browser.get("/console/static/console.css").headers["cache-control"] == "max-age=3600"


def test_hsts_seconds_sets_the_max_age_and_zero_sends_none(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> None:
    for seconds, expected in ((600, "max-age=600"), (0, None)):
        settings = test_settings(
            tmp_path_factory.mktemp("hsts"), database_url, hsts_seconds=seconds
        )
        with ServerThread(settings) as running:
            for answer in answers(running, None):
                assert answer.headers.get("strict-transport-security") == expected
