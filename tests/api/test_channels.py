"""Channels through the API with test keys: WhatsApp and email beside SMS, and fallback
from one channel to the next with the same code, each step with its events."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from relay.accounts.models import NewAccount
from relay.delivery.usage import usage_totals
from tests.harness import RunningServer, ServerThread, create_account, read_db, test_settings
from tests.webhooks.receiver import events_of, isolated_database, wait_until

DELIVERED = "+15005550006"
FIRST_FAILS = "+15005550001"
UNDELIVERABLE = "+15005550002"
SLOW = "+15005550003"
REJECTED = "+15005550004"
SLOW_DELIVERY = 0.3

_numbers = itertools.count(2000)


def mobile() -> str:
    return f"+1415557{next(_numbers) % 10000:04d}"


def address() -> str:
    return f"user{next(_numbers)}@example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "channels_api", tmp_path_factory.mktemp("db"))
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        sandbox_slow_delivery=SLOW_DELIVERY,
        carriers={
            "live-sms": {"kind": "sandbox"},
            "live-whatsapp": {"kind": "sandbox", "channel": "whatsapp"},
        },
        routes={"default": ["live-sms"]},
        channel_routes={"whatsapp": ["live-whatsapp"]},
    )
    with ServerThread(settings) as running:
        yield running


def create(api: httpx.Client, to: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/verifications", json={"to": to, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def summary(obj: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    return [
        (a["channel"], a["carrier"], a["status"], a["error"] and a["error"]["code"])
        for a in obj["attempts"]
    ]


def events(api: httpx.Client, related: str) -> list[tuple[str, str]]:
    """Each event's type, and the channel the verification it carries shows."""
    return [(e["type"], e["data"]["object"]["channel"]) for e in events_of(api, related)]


def codes_sent(server: RunningServer, to: str) -> list[str]:
    return [m.passcode.code for m in server.services.sandbox.sent if m.to == to and m.passcode]


# --- one channel ------------------------------------------------------------------


def test_whatsapp_alone_goes_through_the_whatsapp_sandbox(api: httpx.Client) -> None:
    created = create(api, DELIVERED, channel="whatsapp")
    assert summary(created) == [("whatsapp", "sandbox-whatsapp", "delivered", None)]
    assert created["channel"] == "whatsapp"
    assert events(api, created["id"]) == [
        ("verification.sent", "whatsapp"),
        ("verification.delivered", "whatsapp"),
    ]


def test_sms_stays_the_default_and_shows_its_channel(api: httpx.Client) -> None:
    created = create(api, mobile())
    assert summary(created) == [("sms", "sandbox", "delivered", None)]
    assert created["channel"] == "sms"


def test_an_email_verification_goes_to_the_normalized_address_without_a_country(
    api: httpx.Client, server: RunningServer
) -> None:
    created = create(api, "Ada.Lovelace@EXAMPLE.com", channel="email")
    assert created["to"] == "Ada.Lovelace@example.com"
    assert (created["channel"], created["country"]) == ("email", None)
    assert summary(created) == [("email", "sandbox-email", "delivered", None)]
    sent = [m for m in server.services.sandbox.sent if m.to == created["to"]]
    assert sent
    assert sent[-1].passcode is not None
    # Checked by its address, in any case of the domain.
    checked = api.post(
        "/v1/verifications/check", json={"to": "Ada.Lovelace@example.COM", "code": "000000"}
    )
    assert checked.json()["id"] == created["id"]
    assert checked.json()["status"] == "approved"


@pytest.mark.parametrize(
    ("local", "attempt"),
    [
        ("fails-first", ("email", "sandbox-email", "failed", "carrier_unavailable")),
        ("undeliverable", ("email", "sandbox-email", "failed", "sms_undeliverable")),
        ("rejected", ("email", "sandbox-email", "failed", "carrier_rejected")),
        ("Rejected", ("email", "sandbox-email", "failed", "carrier_rejected")),
    ],
)
def test_the_email_sandbox_scripts_its_magic_local_parts_at_any_domain(
    api: httpx.Client, local: str, attempt: tuple[str, str, str, str]
) -> None:
    created = create(api, f"{local}@mail{next(_numbers)}.example.org", channel="email")
    assert summary(created) == [attempt]
    assert created["status"] == "pending"


def test_a_slow_email_is_sent_first_and_delivered_later(api: httpx.Client) -> None:
    created = create(api, f"slow@slow{next(_numbers)}.example.net", channel="email")
    assert summary(created) == [("email", "sandbox-email", "sent", None)]

    def delivered() -> bool:
        found = api.get(f"/v1/verifications/{created['id']}").json()
        return bool(found["attempts"][0]["status"] == "delivered")

    wait_until(delivered, timeout=10, what="the slow email receipt", interval=0.05)
    assert events(api, created["id"]) == [
        ("verification.sent", "email"),
        ("verification.delivered", "email"),
    ]


# --- fallback across channels ----------------------------------------------------------


def test_whatsapp_refused_at_submit_falls_back_to_sms_with_the_same_code(
    api: httpx.Client, server: RunningServer
) -> None:
    created = create(api, FIRST_FAILS, channels=["whatsapp", "sms"])
    assert summary(created) == [
        ("whatsapp", "sandbox-whatsapp", "failed", "carrier_unavailable"),
        ("sms", "sandbox", "delivered", None),
    ]
    assert created["channel"] == "sms"
    assert events(api, created["id"]) == [
        ("verification.failed", "whatsapp"),
        ("verification.sent", "sms"),
        ("verification.delivered", "sms"),
    ]
    # The WhatsApp try never left; SMS carried the code the verification holds.
    assert api.post("/v1/verifications/check", json={"id": created["id"], "code": "000000"}).json()[
        "verified"
    ]


def test_whatsapp_undeliverable_falls_back_to_sms_with_the_same_code(
    api: httpx.Client, server: RunningServer
) -> None:
    before = len(codes_sent(server, UNDELIVERABLE))
    created = create(api, UNDELIVERABLE, channels=["whatsapp", "sms"])
    assert summary(created) == [
        ("whatsapp", "sandbox-whatsapp", "failed", "sms_undeliverable"),
        ("sms", "sandbox", "delivered", None),
    ]
    assert events(api, created["id"]) == [
        ("verification.sent", "whatsapp"),
        ("verification.failed", "whatsapp"),
        ("verification.sent", "sms"),
        ("verification.delivered", "sms"),
    ]
    codes = codes_sent(server, UNDELIVERABLE)[before:]
    assert len(codes) == 2
    assert codes[0] == codes[1]


def test_both_phone_channels_failing_leave_it_pending_and_email_is_the_last_resort(
    api: httpx.Client,
) -> None:
    # Every carrier of every channel refuses +15005550004.
    phone = create(api, REJECTED, channels=["whatsapp", "sms"])
    assert summary(phone) == [
        ("whatsapp", "sandbox-whatsapp", "failed", "carrier_rejected"),
        ("sms", "sandbox", "failed", "carrier_rejected"),
        ("sms", "sandbox-backup", "failed", "carrier_rejected"),
    ]
    assert phone["status"] == "pending"
    assert events(api, phone["id"]) == [
        ("verification.failed", "whatsapp"),
        ("verification.failed", "sms"),
        ("verification.failed", "sms"),
    ]
    # One verification has one destination: the user's email address is a verification
    # of its own, which delivers.
    mail = create(api, address(), channel="email")
    assert summary(mail) == [("email", "sandbox-email", "delivered", None)]
    assert events(api, mail["id"]) == [
        ("verification.sent", "email"),
        ("verification.delivered", "email"),
    ]
    assert api.post("/v1/verifications/check", json={"id": mail["id"], "code": "000000"}).json()[
        "verified"
    ]


def test_sms_first_keeps_its_own_scripts_and_whatsapp_delivers_as_the_fallback(
    api: httpx.Client,
) -> None:
    created = create(api, UNDELIVERABLE, channels=["sms", "whatsapp"])
    assert summary(created) == [
        ("sms", "sandbox", "failed", "sms_undeliverable"),
        ("sms", "sandbox-backup", "failed", "sms_undeliverable"),
        ("whatsapp", "sandbox-whatsapp", "delivered", None),
    ]
    assert created["channel"] == "whatsapp"


def test_attempts_are_counted_in_metrics_by_their_channel(api: httpx.Client) -> None:
    def counted(carrier: str, outcome: str, channel: str) -> float:
        labels = {"carrier": carrier, "country": "US", "outcome": outcome, "channel": channel}
        return REGISTRY.get_sample_value("relay_sms_attempts_total", labels) or 0.0

    before = (
        counted("sandbox-whatsapp", "carrier_unavailable", "whatsapp"),
        counted("sandbox", "delivered", "sms"),
    )
    create(api, FIRST_FAILS, channels=["whatsapp", "sms"])
    after = (
        counted("sandbox-whatsapp", "carrier_unavailable", "whatsapp"),
        counted("sandbox", "delivered", "sms"),
    )
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


# --- resends ----------------------------------------------------------------------------


def test_a_resend_may_name_another_channel_and_keeps_the_code(
    api: httpx.Client, server: RunningServer
) -> None:
    to = mobile()
    first = create(api, to)
    resent = create(api, to, channel="whatsapp")
    assert resent["id"] == first["id"]
    assert [a["channel"] for a in resent["attempts"]] == ["sms", "whatsapp"]
    assert resent["channel"] == "whatsapp"
    codes = codes_sent(server, to)
    assert len(codes) == 2
    assert codes[0] == codes[1]


def test_the_resend_interval_counts_per_channel(api: httpx.Client, server: RunningServer) -> None:
    to = mobile()
    create(api, to)
    assert create(api, to, channel="whatsapp")["channel"] == "whatsapp"
    # Back to SMS, and WhatsApp again: each channel's own 30 seconds have not passed.
    for channel in ("sms", "whatsapp"):
        response = api.post("/v1/verifications", json={"to": to, "channel": channel})
        assert response.status_code == 429, response.text
        assert response.json()["error"]["code"] == "resend_too_soon"
    server.clock.offset = timedelta(seconds=31)
    assert create(api, to, channel="sms")["channel"] == "sms"


def test_a_resend_on_a_channel_not_used_yet_does_not_wait(api: httpx.Client) -> None:
    to = mobile()
    create(api, to, channels=["whatsapp", "sms"])  # WhatsApp delivers: no SMS went out
    # Without channels a resend is SMS, as any create.
    with_default = api.post("/v1/verifications", json={"to": to})
    assert with_default.status_code == 200, with_default.text
    assert with_default.json()["channel"] == "sms"


# --- live keys ----------------------------------------------------------------------------


def test_a_live_key_sends_whatsapp_through_the_configured_channel_route(
    live_api: httpx.Client, server: RunningServer, account: NewAccount
) -> None:
    created = create(live_api, mobile(), channels=["whatsapp", "sms"])
    assert summary(created) == [("whatsapp", "live-whatsapp", "delivered", None)]
    totals = read_db(server.settings, lambda c: usage_totals(c, account_id=account.id))
    assert totals == {"delivered": 1}


def test_a_live_key_without_an_email_carrier_is_refused_before_anything_is_written(
    live_api: httpx.Client,
) -> None:
    response = live_api.post("/v1/verifications", json={"to": address(), "channel": "email"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("parameter_invalid", "channel")
    assert "email" in error["message"]
    assert live_api.get("/v1/verifications").json()["data"] == []


# --- a later answer: no receipt in time -------------------------------------------------


@pytest.fixture(scope="module")
def patient(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Its slow sandbox reports after two real minutes: within a test only the receipt
    deadline, on the server's clock, moves on."""
    url = isolated_database(database_url, "channels_patient", tmp_path_factory.mktemp("db"))
    settings = test_settings(tmp_path_factory.mktemp("data"), url, sandbox_slow_delivery=120)
    with ServerThread(settings) as running:
        yield running


def test_whatsapp_without_a_receipt_in_time_falls_back_to_sms_later(
    patient: RunningServer,
) -> None:
    account = create_account(patient.settings)
    with patient.client(account.test_key) as api:
        created = create(api, SLOW, channels=["whatsapp", "sms"])
        assert summary(created) == [("whatsapp", "sandbox-whatsapp", "sent", None)]
        # Past the WhatsApp sandbox's receipt deadline, within the code's TTL.
        patient.clock.advance(150)
        found: dict[str, Any] = {}

        def sms_delivered() -> bool:
            found.update(api.get(f"/v1/verifications/{created['id']}").json())
            return len(found["attempts"]) == 2 and found["attempts"][1]["status"] == "delivered"

        wait_until(sms_delivered, timeout=10, what="the SMS fallback", interval=0.05)
        assert summary(found) == [
            ("whatsapp", "sandbox-whatsapp", "failed", "delivery_report_timeout"),
            ("sms", "sandbox", "delivered", None),
        ]
        assert found["channel"] == "sms"
        assert events(api, created["id"]) == [
            ("verification.sent", "whatsapp"),
            ("verification.failed", "whatsapp"),
            ("verification.sent", "sms"),
            ("verification.delivered", "sms"),
        ]
