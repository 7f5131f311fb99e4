"""Channels the API refuses (400 before anything is written), and limits counted per
destination and channel."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.harness import (
    RunningServer,
    ServerThread,
    create_account,
    test_settings,
    using_services,
)
from tests.webhooks.receiver import isolated_database

_numbers = itertools.count(3000)


def mobile() -> str:
    return f"+1415558{next(_numbers) % 10000:04d}"


# 64 + 1 + 63 + 1 + 63 + 1 + 58 + 4 = 255 characters: one over, every part valid.
OVERLONG_ADDRESS = "a" * 64 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 58 + ".com"


def refusal(response: httpx.Response) -> tuple[int, str, str | None]:
    error = response.json()["error"]
    return response.status_code, error["code"], error.get("param")


BAD_BODIES: dict[str, tuple[dict[str, Any], str]] = {
    "channel and channels together": (
        {"to": "+15005550006", "channel": "sms", "channels": ["sms"]},
        "channels",
    ),
    "a channel named twice": ({"to": "+15005550006", "channels": ["sms", "sms"]}, "channels"),
    "an unknown channel": ({"to": "+15005550006", "channel": "fax"}, "channel"),
    "an unknown channel in the list": (
        {"to": "+15005550006", "channels": ["whatsapp", "pigeon"]},
        "channels.1",
    ),
    "an empty list": ({"to": "+15005550006", "channels": []}, "channels"),
    "a channel that is not a string": ({"to": "+15005550006", "channel": 1}, "channel"),
    "email beside sms": ({"to": "ada@example.com", "channels": ["email", "sms"]}, "channels"),
    "whatsapp beside email": (
        {"to": "+15005550006", "channels": ["whatsapp", "email"]},
        "channels",
    ),
    "a number for email": ({"to": "+15005550006", "channel": "email"}, "to"),
    "an address for sms": ({"to": "ada@example.com"}, "to"),
    "an address for whatsapp": ({"to": "ada@example.com", "channel": "whatsapp"}, "to"),
    "an address without a domain": ({"to": "ada@", "channel": "email"}, "to"),
    "an address with a bare host": ({"to": "ada@localhost", "channel": "email"}, "to"),
    "an address with two @": ({"to": "a@b@example.com", "channel": "email"}, "to"),
    "an address over 254 characters": (
        {"to": OVERLONG_ADDRESS, "channel": "email"},
        "to",
    ),
}


@pytest.mark.parametrize(("body", "param"), BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_each_bad_combination_is_parameter_invalid_and_writes_nothing(
    api: httpx.Client, body: dict[str, Any], param: str
) -> None:
    response = api.post("/v1/verifications", json=body)
    assert refusal(response) == (400, "parameter_invalid", param), response.text
    assert api.get("/v1/verifications").json()["data"] == []


def test_a_malformed_number_keeps_its_own_error_on_a_phone_channel(api: httpx.Client) -> None:
    response = api.post("/v1/verifications", json={"to": "+1 415", "channel": "whatsapp"})
    assert refusal(response) == (400, "phone_number_invalid", "to")


def test_whatsapp_refuses_what_sms_refuses(api: httpx.Client) -> None:
    premium = api.post("/v1/verifications", json={"to": "+19005550100", "channel": "whatsapp"})
    assert refusal(premium)[1] == "phone_number_unsupported"


def test_an_email_address_is_not_held_to_the_allowed_countries(
    server: RunningServer,
) -> None:
    account = create_account(server.settings)
    only_france = frozenset({"FR"})
    using_services(
        server.settings,
        lambda services: services.accounts.set_allowed_countries(account.id, only_france),
    )
    with server.client(account.test_key) as api:
        phone = api.post("/v1/verifications", json={"to": mobile(), "channel": "whatsapp"})
        assert refusal(phone) == (400, "country_not_allowed", "to")
        mail = api.post("/v1/verifications", json={"to": "ada@example.com", "channel": "email"})
        assert mail.status_code == 200, mail.text


def test_an_idempotency_key_reused_with_another_channel_is_refused(api: httpx.Client) -> None:
    to = mobile()
    headers = {"Idempotency-Key": f"channels-{to}"}
    first = api.post("/v1/verifications", json={"to": to}, headers=headers)
    assert first.status_code == 200
    again = api.post("/v1/verifications", json={"to": to, "channel": "whatsapp"}, headers=headers)
    assert (again.status_code, again.json()["error"]["code"]) == (422, "idempotency_key_reused")


# --- limits per destination and channel ----------------------------------------------


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "channel_limits", tmp_path_factory.mktemp("db"))
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        number_verifications_per_hour=1,
        test_mode_number_limit_factor=2,
        pumping_guard="off",
    )
    with ServerThread(settings) as running:
        yield running


@pytest.fixture
def tight_api(tight: RunningServer) -> Iterator[httpx.Client]:
    tight.clock.offset = timedelta(0)
    account: NewAccount = create_account(tight.settings)
    with tight.client(account.test_key) as client:
        yield client


def open_and_cancel(api: httpx.Client, to: str, **fields: Any) -> httpx.Response:
    opened = api.post("/v1/verifications", json={"to": to, **fields})
    if opened.status_code == 200:
        api.post(f"/v1/verifications/{opened.json()['id']}/cancel")
    return opened


def test_verifications_per_hour_count_per_destination_and_channel(
    tight_api: httpx.Client,
) -> None:
    to = mobile()
    for _ in range(2):  # 1 an hour, doubled for a test key
        assert open_and_cancel(tight_api, to).status_code == 200
    refused = open_and_cancel(tight_api, to)
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        429,
        "too_many_verifications",
    )
    # WhatsApp to the same number has a count of its own.
    for _ in range(2):
        assert open_and_cancel(tight_api, to, channel="whatsapp").status_code == 200
    assert open_and_cancel(tight_api, to, channel="whatsapp").status_code == 429
    # A list counts for the channel it asks for first.
    assert open_and_cancel(tight_api, to, channels=["whatsapp", "sms"]).status_code == 429


def test_an_email_address_has_its_own_hourly_count(tight_api: httpx.Client) -> None:
    to = f"limits{next(_numbers)}@example.com"
    for _ in range(2):
        assert open_and_cancel(tight_api, to, channel="email").status_code == 200
    refused = open_and_cancel(tight_api, to, channel="email")
    assert refused.json()["error"]["code"] == "too_many_verifications"
    other = open_and_cancel(tight_api, f"other{next(_numbers)}@example.com", channel="email")
    assert other.status_code == 200
