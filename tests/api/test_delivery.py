"""The delivery layer through the API: the sandbox's test numbers, failover, the Send API, usage."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.cli.main import main as relay_main
from relay.db.sql import Sql
from relay.delivery.usage import usage_totals
from tests.harness import RunningServer, ServerThread, create_account, read_db, test_settings
from tests.webhooks.receiver import events_of, isolated_database, wait_until

DELIVERED = "+15005550006"
FIRST_FAILS = "+15005550001"
UNDELIVERABLE = "+15005550002"
SLOW = "+15005550003"
REJECTED = "+15005550004"
SLOW_DELIVERY = 0.3

_numbers = itertools.count(1000)


def mobile() -> str:
    return f"+1415556{next(_numbers) % 10000:04d}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "delivery_api", tmp_path_factory.mktemp("db"))
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        sandbox_slow_delivery=SLOW_DELIVERY,
        carriers={"live-a": {"kind": "sandbox"}, "live-b": {"kind": "sandbox"}},
        routes={"default": ["live-a", "live-b"]},
    )
    with ServerThread(settings) as running:
        yield running


def create(api: httpx.Client, to: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/verifications", json={"to": to, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def send(api: httpx.Client, to: str, code: str = "482913", **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/messages", json={"to": to, "code": code, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def summary(obj: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(a["carrier"], a["status"], a["error"] and a["error"]["code"]) for a in obj["attempts"]]


def event_types(api: httpx.Client, related: str) -> list[str]:
    return [event["type"] for event in events_of(api, related)]


# --- the sandbox's test numbers -------------------------------------------------


def test_a_test_key_send_is_delivered_by_the_sandbox(api: httpx.Client) -> None:
    created = create(api, DELIVERED)
    assert summary(created) == [("sandbox", "delivered", None)]
    events = events_of(api, created["id"])
    assert [e["type"] for e in events] == ["verification.sent", "verification.delivered"]
    # Each event shows the verification as it was at that moment.
    shown = [e["data"]["object"]["attempts"][0]["status"] for e in events]
    assert shown == ["sent", "delivered"]


def test_first_carrier_fails_then_the_next_delivers(api: httpx.Client) -> None:
    created = create(api, FIRST_FAILS)
    assert summary(created) == [
        ("sandbox", "failed", "carrier_unavailable"),
        ("sandbox-backup", "delivered", None),
    ]
    error = created["attempts"][0]["error"]
    assert error["type"] == "carrier_error"
    assert error["carrier_code"] == "sandbox_unreachable"
    assert error["doc_url"].endswith("/docs/errors#carrier_unavailable")
    assert event_types(api, created["id"]) == [
        "verification.failed",
        "verification.sent",
        "verification.delivered",
    ]


def test_an_undeliverable_number_fails_on_every_route_and_stays_pending(
    api: httpx.Client, server: RunningServer
) -> None:
    created = create(api, UNDELIVERABLE)
    assert created["status"] == "pending"
    assert summary(created) == [
        ("sandbox", "failed", "sms_undeliverable"),
        ("sandbox-backup", "failed", "sms_undeliverable"),
    ]
    assert created["attempts"][0]["error"]["carrier_code"] == "UNDELIV"
    assert event_types(api, created["id"]) == [
        "verification.sent",
        "verification.failed",
        "verification.sent",
        "verification.failed",
    ]
    # The same code went out on both routes.
    bodies = [sms.body for sms in server.services.sandbox.sent if sms.to == UNDELIVERABLE]
    assert len(bodies) >= 2
    assert bodies[-1] == bodies[-2]


def test_a_resend_starts_again_at_the_first_carrier(
    api: httpx.Client, server: RunningServer
) -> None:
    created = create(api, UNDELIVERABLE)
    server.clock.offset = timedelta(seconds=31)
    resent = create(api, UNDELIVERABLE)
    assert resent["id"] == created["id"]
    assert [a["carrier"] for a in resent["attempts"]] == [
        "sandbox",
        "sandbox-backup",
        "sandbox",
        "sandbox-backup",
    ]


def test_slow_delivery_is_sent_first_and_delivered_later(api: httpx.Client) -> None:
    created = create(api, SLOW)
    assert summary(created) == [("sandbox", "sent", None)]
    found: dict[str, Any] = {}

    def delivered() -> bool:
        found.update(api.get(f"/v1/verifications/{created['id']}").json())
        return bool(found["attempts"]) and found["attempts"][0]["status"] == "delivered"

    wait_until(delivered, timeout=10, what="the slow sandbox receipt", interval=0.05)
    assert event_types(api, created["id"]) == ["verification.sent", "verification.delivered"]


def test_a_rejected_number_is_refused_by_every_carrier(api: httpx.Client) -> None:
    created = create(api, REJECTED)
    assert summary(created) == [
        ("sandbox", "failed", "carrier_rejected"),
        ("sandbox-backup", "failed", "carrier_rejected"),
    ]
    assert event_types(api, created["id"]) == ["verification.failed", "verification.failed"]


def test_live_keys_refuse_the_sandbox_test_numbers(live_api: httpx.Client) -> None:
    response = live_api.post("/v1/verifications", json={"to": DELIVERED})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "phone_number_unsupported"


# --- live routes and usage ---------------------------------------------------------


def test_a_live_send_goes_through_the_configured_route_and_is_counted(
    server: RunningServer, account: NewAccount, live_api: httpx.Client
) -> None:
    created = create(live_api, mobile())
    assert summary(created) == [("live-a", "delivered", None)]
    totals = read_db(server.settings, lambda c: usage_totals(c, account_id=account.id))
    assert totals == {"delivered": 1}


def test_test_keys_are_never_counted_as_usage(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    create(api, mobile())
    create(api, UNDELIVERABLE)
    assert read_db(server.settings, lambda c: usage_totals(c, account_id=account.id)) == {}


PRICED = """
[carriers.live-a]
kind = "sandbox"
[carriers.live-a.prices]
US = 0.0075
[carriers.live-b]
kind = "sandbox"
[routes]
default = ["live-a", "live-b"]
"""


def test_relay_usage_prints_live_sends_segments_and_spend_per_country_carrier_and_outcome(
    server: RunningServer,
    live_api: httpx.Client,
    account: NewAccount,
    capsys: Any,
    tmp_path: Path,
) -> None:
    create(live_api, mobile())
    create(live_api, mobile())
    send(live_api, "+447400123456")
    config = tmp_path / "relay.toml"
    config.write_text(PRICED)
    capsys.readouterr()
    url = server.settings.resolved_database_url
    usage = ["usage", "--database-url", url, "--data-dir", str(server.settings.data_dir)]
    usage += ["--config", str(config), "--account", account.id]
    assert relay_main([*usage, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # Each code is one GSM-7 segment; only the US has a price for live-a.
    assert {
        (r["country"], r["carrier"], r["outcome"], r["count"], r["segments"], r["spend"])
        for r in rows
    } == {
        ("US", "live-a", "delivered", 2, 2, "0.0150"),
        ("GB", "live-a", "delivered", 1, 1, None),
    }

    assert relay_main(usage) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "account", "day", "country", "carrier", "outcome", "count", "segments", "spend"
    ]  # fmt: skip
    assert "3 live send attempt(s) counted" in lines[3]
    # Totals per carrier and country close the table; an unpriced country has no spend.
    assert [line.split() for line in lines[-3:]] == [
        ["carrier", "country", "count", "segments", "spend"],
        ["live-a", "GB", "1", "1"],
        ["live-a", "US", "2", "2", "0.0150"],
    ]


def test_relay_usage_refuses_a_malformed_day(server: RunningServer, capsys: Any) -> None:
    where = ["--database-url", server.settings.resolved_database_url]
    where += ["--data-dir", str(server.settings.data_dir)]
    assert relay_main(["usage", *where, "--since", "yesterday"]) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err


# --- the Send API ------------------------------------------------------------------


def test_a_message_is_delivered_and_never_shows_its_code(api: httpx.Client) -> None:
    sent = send(api, mobile(), code="Zq81Xy", metadata={"order": "7"})
    assert sent["id"].startswith("msg_")
    assert sent["object"] == "message"
    assert sent["status"] == "delivered"
    assert sent["sender"] == "Relay"
    assert sent["metadata"] == {"order": "7"}
    assert summary(sent) == [("sandbox", "delivered", None)]
    assert "Zq81Xy" not in json.dumps(sent)
    fetched = api.get(f"/v1/messages/{sent['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == sent
    events = events_of(api, sent["id"])
    assert [e["type"] for e in events] == ["message.sent", "message.delivered"]
    assert [e["data"]["object"]["status"] for e in events] == ["sent", "delivered"]


def test_the_sms_carries_the_clients_code_in_the_template(
    api: httpx.Client, server: RunningServer
) -> None:
    to = mobile()
    send(api, to, code="771204", locale="fr")
    body = [sms.body for sms in server.services.sandbox.sent if sms.to == to][-1]
    assert "771204" in body
    assert "Acme" in body


def test_a_message_that_fails_everywhere_ends_failed(
    api: httpx.Client, server: RunningServer
) -> None:
    sent = send(api, UNDELIVERABLE)
    assert sent["status"] == "failed"
    assert summary(sent) == [
        ("sandbox", "failed", "sms_undeliverable"),
        ("sandbox-backup", "failed", "sms_undeliverable"),
    ]
    events = events_of(api, sent["id"])
    assert [e["type"] for e in events] == [
        "message.sent",
        "message.failed",
        "message.sent",
        "message.failed",
    ]
    # Only the last failure is final; the payload says so.
    assert [e["data"]["object"]["status"] for e in events][-1] == "failed"
    assert _sealed_code(server, sent["id"]) is None


def test_a_message_keeps_its_code_sealed_only_until_it_is_final(
    api: httpx.Client, server: RunningServer
) -> None:
    sent = send(api, SLOW)
    assert sent["status"] == "sent"
    assert _sealed_code(server, sent["id"]) is not None
    wait_until(
        lambda: api.get(f"/v1/messages/{sent['id']}").json()["status"] == "delivered",
        timeout=10,
        what="slow message delivery",
        interval=0.05,
    )
    assert _sealed_code(server, sent["id"]) is None


@pytest.mark.parametrize("code", ["123", "12345678901", "12 34", "12-34", "ÅÄÖ123"])
def test_a_message_code_must_be_4_to_10_letters_or_digits(api: httpx.Client, code: str) -> None:
    response = api.post("/v1/messages", json={"to": mobile(), "code": code})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "code"


def test_a_message_needs_a_code(api: httpx.Client) -> None:
    response = api.post("/v1/messages", json={"to": mobile()})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parameter_missing"


def test_another_accounts_message_is_missing(api: httpx.Client, server: RunningServer) -> None:
    sent = send(api, mobile())
    other = create_account(server.settings, "Other")
    with server.client(other.test_key) as stranger:
        response = stranger.get(f"/v1/messages/{sent['id']}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "resource_missing"


def test_a_live_key_cannot_read_a_test_message(api: httpx.Client, live_api: httpx.Client) -> None:
    sent = send(api, mobile())
    assert live_api.get(f"/v1/messages/{sent['id']}").status_code == 404


def test_a_malformed_message_id_is_missing(api: httpx.Client) -> None:
    response = api.get("/v1/messages/ver_nothing")
    assert response.status_code == 404


# --- helpers -------------------------------------------------------------------------


_SEALED_CODE = Sql("SELECT sealed_code FROM messages WHERE id = :id")


def _sealed_code(server: RunningServer, message_id: str) -> bytes | None:
    row = read_db(server.settings, lambda tx: tx.fetchrow(_SEALED_CODE, {"id": message_id}))
    assert row is not None
    found: bytes | None = row["sealed_code"]
    return found
