"""Twilio's status callbacks without HTTP: its signature scheme, status mapping and settings."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import pytest

from relay.carriers.base import DeliveryReport
from relay.carriers.callbacks import StatusCallback
from relay.carriers.providers import http_carrier
from relay.carriers.twilio import (
    CallbackPayloadError,
    CallbackSignatureError,
    parse_status_callback,
    twilio_signature,
)
from tests.carriers.test_twilio import ACCOUNT_SID, AUTH_TOKEN, NOW, settings
from tests.carriers.twilio_fake import sign

REFERENCE_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
HTTP_URL = REFERENCE_URL.replace("https", "http")
CALLBACK_URL = "https://relay.example.com/carriers/twilio-main/status"
REFERENCE_FORM = {
    "CallSid": "CA1234567890ABCDE",
    "Caller": "+14158675309",
    "Digits": "1234",
    "From": "+14158675309",
    "To": "+18005551212",
}


def test_signatures_match_twilios_own_reference_example() -> None:
    # Token, URL, form and signature from twilio-python's test_request_validator.py.
    assert (
        twilio_signature("12345", REFERENCE_URL, REFERENCE_FORM) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    )


@pytest.mark.parametrize(
    ("url", "signature"),
    [
        (REFERENCE_URL, "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (REFERENCE_URL, "kvajT1Ptam85bY51eRf/AJRuM3w="),
        (REFERENCE_URL.replace(".com", ".com:1234"), "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (HTTP_URL, "0ZXoZLH/DfblKGATFgpif+LLRf4="),
        (HTTP_URL.replace(".com", ".com:1234"), "Zmvh+3yNM1Phv2jhDCwEM3q5ebU="),
    ],
    ids=[
        "https",
        "https-signed-with-443",
        "https-port-dropped",
        "http-signed-with-80",
        "http-port",
    ],
)
def test_twilios_reference_signatures_pass_with_or_without_the_port(
    url: str, signature: str
) -> None:
    # Twilio signs with and without the default port; a passing signature gets
    # as far as noticing this reference form is not a message status.
    with pytest.raises(CallbackPayloadError):
        parse_callback(url, REFERENCE_FORM, signature, token="12345")


def test_a_callback_whose_form_was_altered_after_signing_is_refused() -> None:
    form = status_form("undelivered", ErrorCode="30003")
    signature = sign(AUTH_TOKEN, CALLBACK_URL, form)

    with pytest.raises(CallbackSignatureError):
        parse_callback(CALLBACK_URL, {**form, "MessageStatus": "delivered"}, signature)


def test_a_callback_signed_for_another_url_is_refused() -> None:
    form = status_form("delivered")
    signature = sign(AUTH_TOKEN, "https://attacker.example/cb", form)

    with pytest.raises(CallbackSignatureError):
        parse_callback(CALLBACK_URL, form, signature)


@pytest.mark.parametrize("signature", [None, "", "not base64 at all", "é"])
def test_a_callback_without_a_usable_signature_is_refused(signature: str | None) -> None:
    with pytest.raises(CallbackSignatureError):
        parse_callback(CALLBACK_URL, status_form("delivered"), signature)


@pytest.mark.parametrize(
    ("status", "extra", "expected"),
    [
        ("delivered", {}, ("delivered", None)),
        ("read", {}, ("delivered", None)),
        ("undelivered", {"ErrorCode": "30003"}, ("failed", "twilio_30003")),
        ("failed", {"ErrorCode": "30008"}, ("failed", "twilio_30008")),
        ("failed", {}, ("failed", None)),
        ("canceled", {}, ("failed", None)),
        ("accepted", {}, None),
        ("scheduled", {}, None),
        ("queued", {}, None),
        ("sending", {}, None),
        ("sent", {}, None),
    ],
)
def test_only_final_statuses_become_reports(
    status: str, extra: dict[str, str], expected: tuple[str, str | None] | None
) -> None:
    form = status_form(status, **extra)

    report = parse_callback(CALLBACK_URL, form, sign(AUTH_TOKEN, CALLBACK_URL, form))

    summary = None if report is None else (report.status, report.error_code)
    assert summary == expected
    assert report is None or (report.carrier_message_id, report.at) == ("SM1", NOW)


def test_a_signed_callback_without_a_message_sid_is_malformed() -> None:
    form = {"MessageStatus": "delivered"}

    with pytest.raises(CallbackPayloadError):
        parse_callback(CALLBACK_URL, form, sign(AUTH_TOKEN, CALLBACK_URL, form))


async def test_a_final_report_before_start_is_a_programming_error() -> None:
    carrier = http_carrier(settings("http://127.0.0.1:9"))
    form = status_form("delivered")

    signature = {"x-twilio-signature": sign(AUTH_TOKEN, CALLBACK_URL, form)}
    callback = StatusCallback(CALLBACK_URL, urlencode(form).encode(), signature)
    with pytest.raises(RuntimeError, match="before start"):
        await carrier.receive_status(callback)
    await carrier.close()


def test_settings_need_a_from_number_or_a_messaging_service() -> None:
    with pytest.raises(ValueError, match="from_number or messaging_service_sid"):
        replace(settings("http://127.0.0.1:9"), from_number=None)


def test_settings_refuse_an_account_sid_twilio_would_not_issue() -> None:
    with pytest.raises(ValueError, match="account_sid"):
        replace(settings("http://127.0.0.1:9"), account_sid="AC123")


def test_settings_keep_the_auth_token_out_of_their_repr() -> None:
    assert AUTH_TOKEN not in repr(settings("http://127.0.0.1:9"))


def status_form(status: str, **extra: str) -> dict[str, str]:
    return {"MessageSid": "SM1", "MessageStatus": status, "AccountSid": ACCOUNT_SID, **extra}


def parse_callback(
    url: str, form: dict[str, str], signature: str | None, *, token: str = AUTH_TOKEN
) -> DeliveryReport | None:
    return parse_status_callback(
        url=url, form=form, signature=signature, auth_token=token, carrier="tw", now=NOW
    )
