"""Who may read /metrics: loopback and configured networks, or the admin token; never
an API key."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from relay.accounts.models import NewAccount
from relay.metrics import directory
from relay.web.metrics_route import may_read_metrics
from tests.harness import RunningServer

OFFICE = [ipaddress.ip_network("10.1.0.0/16")]
TOKEN = "metrics-admin-token-0123456789"


def allowed(client: str | None, token: str | None = None, **headers: str) -> bool:
    sent = {name.replace("_", "-").encode(): value.encode() for name, value in headers.items()}
    return may_read_metrics(client, sent, networks=OFFICE, token=token)


def test_loopback_reads_metrics_without_a_credential() -> None:
    assert allowed("127.0.0.1")
    assert allowed("::1")


def test_a_configured_network_reads_metrics_without_a_credential() -> None:
    assert allowed("10.1.2.3")


def test_any_other_address_without_the_token_is_refused() -> None:
    assert not allowed("203.0.113.9")
    assert not allowed("10.2.0.1")
    assert not allowed(None)


def test_the_admin_token_reads_metrics_from_anywhere() -> None:
    assert allowed("203.0.113.9", TOKEN, authorization=f"Bearer {TOKEN}")


def test_a_wrong_token_is_refused_even_from_loopback() -> None:
    assert not allowed("127.0.0.1", TOKEN, authorization="Bearer nope")
    assert not allowed("127.0.0.1", None, authorization=f"Bearer {TOKEN}")


def test_a_request_a_proxy_forwarded_needs_the_token() -> None:
    # The proxy is the peer: its address says nothing of the client's.
    assert not allowed("127.0.0.1", x_forwarded_for="203.0.113.9")
    assert not allowed("10.1.2.3", forwarded="for=203.0.113.9")
    assert allowed("127.0.0.1", TOKEN, authorization=f"Bearer {TOKEN}", x_forwarded_for="a")


def test_an_api_key_cannot_read_metrics(server: RunningServer, account: NewAccount) -> None:
    for key in (account.test_key, account.live_key):
        with server.client(key) as client:
            answer = client.get("/metrics")
        assert answer.status_code == 401
        error = answer.json()["error"]
        assert error["type"] == "authentication_error"
        assert error["code"] == "authentication_failed"
        assert "relay_" not in answer.text


def test_loopback_scrapes_prometheus_text(server: RunningServer) -> None:
    with server.client(None) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert "# TYPE relay_http_requests_total counter" in answer.text
    assert 'relay_outbox_depth{kind="sms"}' in answer.text


def test_a_given_metrics_directory_is_emptied_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "counter_123.db").write_bytes(b"stale")
    monkeypatch.setenv(directory.ENV, os.fspath(tmp_path))
    prepared = directory.prepare(2)
    assert prepared is not None
    assert list(tmp_path.iterdir()) == []
    prepared.remove()
    assert tmp_path.exists()  # the operator's, not Relay's to remove


def test_several_workers_get_a_fresh_directory_removed_at_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Set, then deleted: monkeypatch then restores the variable's absence at the end,
    # which `prepare` sets in os.environ itself. Left set, it named a removed
    # directory to every later `relay` subprocess of the session.
    monkeypatch.setenv(directory.ENV, "")
    monkeypatch.delenv(directory.ENV)
    assert directory.prepare(1) is None
    prepared = directory.prepare(2)
    assert prepared is not None
    assert os.environ[directory.ENV] == os.fspath(prepared.path)
    assert list(prepared.path.iterdir()) == []
    prepared.remove()
    assert not prepared.path.exists()


def test_the_metrics_page_is_not_in_the_api_document(server: RunningServer) -> None:
    with server.client(None) as client:
        document = client.get("/v1/openapi.json").json()
    assert "/metrics" not in document["paths"]
