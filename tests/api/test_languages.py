"""The language of a code: the client's locale, else the destination's country, else English."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.harness import RunningServer


def create(api: httpx.Client, to: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/verifications", json={"to": to, **fields})
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def sms_to(server: RunningServer, to: str) -> str:
    return [sms.body for sms in server.services.sandbox.sent if sms.to == to][-1]


@pytest.mark.parametrize(
    ("to", "locale"),
    [
        ("+33612345678", "fr"),
        ("+819012345678", "ja"),
        ("+5511987654321", "pt"),
        ("+8613812345678", "zh-Hans"),
        ("+886912345678", "zh-Hant"),
        ("+85251234567", "zh-Hant"),
        ("+4915112345678", "de"),
        ("+380501234567", "uk"),
        ("+447911123456", "en"),
        ("+358401234567", "en"),
    ],
)
def test_without_a_locale_the_destinations_country_picks_the_language(
    api: httpx.Client, to: str, locale: str
) -> None:
    assert create(api, to)["locale"] == locale


def test_a_french_number_gets_its_sms_in_french(api: httpx.Client, server: RunningServer) -> None:
    to = "+33612340001"
    create(api, to)
    assert sms_to(server, to).startswith("Votre code de vérification Acme")


@pytest.mark.parametrize(
    ("number", "locale", "chosen"),
    [
        ("+33612341000", "pt-BR", "pt"),
        ("+33612341001", "zh-TW", "zh-Hant"),
        ("+33612341002", "zh-HK", "zh-Hant"),
        ("+33612341003", "zh-Hant", "zh-Hant"),
        ("+33612341004", "zh", "zh-Hans"),
        ("+33612341005", "zh-CN", "zh-Hans"),
        ("+33612341006", "ja-JP", "ja"),
        ("+33612341007", "EN-gb", "en"),
        ("+33612341008", "fi", "en"),
    ],
)
def test_a_given_locale_falls_back_from_region_to_language_to_english(
    api: httpx.Client, number: str, locale: str, chosen: str
) -> None:
    """The number is French: a given locale wins over the country, even when it gets English."""
    assert create(api, number, locale=locale)["locale"] == chosen


def test_a_resend_keeps_the_locale_the_verification_was_opened_with(
    api: httpx.Client, server: RunningServer
) -> None:
    to = "+33612340002"
    first = create(api, to)
    server.clock.offset += timedelta(seconds=31)
    resent = create(api, to, locale="de")
    assert resent["id"] == first["id"]
    assert resent["locale"] == "fr"
    assert sms_to(server, to).startswith("Votre code")


def test_a_message_without_a_locale_is_written_in_the_countrys_language(
    api: httpx.Client, server: RunningServer
) -> None:
    to = "+819012340003"
    response = api.post("/v1/messages", json={"to": to, "code": "482913"})
    assert response.status_code == 200, response.text
    assert response.json()["locale"] == "ja"
    assert (
        sms_to(server, to) == "Acmeの認証コードは482913です。このコードを誰にも教えないでください。"
    )


def test_a_malformed_locale_is_still_refused(api: httpx.Client) -> None:
    response = api.post("/v1/verifications", json={"to": "+33612340004", "locale": "français"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("parameter_invalid", "locale")
