"""HTTP provider tables as `relay config check` and `relay serve` read them, and the
signature arithmetic checked against the providers' own examples."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest

from relay.carriers.callbacks import SECRET_PARAM, url_with_secret
from relay.carriers.http_carrier import HttpCarrier
from relay.carriers.plivo import plivo_signature_v2, plivo_signature_v3
from relay.carriers.registry import build_carriers, carrier_problems
from relay.carriers.vonage import vonage_signature
from relay.cli.checks import unsafe_for_live
from relay.config import Settings
from tests.carriers.telnyx_fake import FakeTelnyx

TELNYX_PUBLIC_KEY = FakeTelnyx(api_key="k").public_key


def telnyx_table(**changes: Any) -> dict[str, Any]:
    return {
        "kind": "http",
        "provider": "telnyx",
        "api_key": "KEY-live",
        "public_key": TELNYX_PUBLIC_KEY,
        "sender": "+12025550100",
        **changes,
    }


def vonage_table(**changes: Any) -> dict[str, Any]:
    base = {"kind": "http", "provider": "vonage", "api_key": "abcd1234", "api_secret": "s3cret"}
    return {**base, "sender": "Relay", "signature_secret": "sig-secret", **changes}


def problems(**tables: dict[str, Any]) -> list[str]:
    settings = Settings(public_url="https://relay.example.com", carriers=tables)
    return carrier_problems(settings)


def test_a_complete_telnyx_table_has_no_problem() -> None:
    assert problems(telnyx=telnyx_table()) == []


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"public_key": base64.b64encode(b"too short").decode()}, "public_key"),
        ({"public_key": "not base64!"}, "public_key"),
        ({"api_key": ""}, "api_key"),
        ({"sender": ""}, "sender"),
        ({"base_url": "ftp://api.telnyx.com"}, "base_url"),
        ({"signature_tolerance": 0}, "signature_tolerance"),
        ({"auth_token": "x"}, "auth_token"),
    ],
)
def test_a_wrong_telnyx_setting_is_reported_by_name(changes: dict[str, Any], named: str) -> None:
    [problem] = problems(telnyx=telnyx_table(**changes))
    assert problem.startswith("carriers.telnyx: ")
    assert named in problem


def test_a_complete_vonage_table_has_no_problem() -> None:
    assert problems(vonage=vonage_table()) == []
    assert problems(vonage=vonage_table(signature_secret=None, callback_secret="x")) == []


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"signature_secret": None}, "callback_secret"),
        ({"signature_method": "sha3"}, "signature_method"),
        ({"api_secret": ""}, "api_secret"),
    ],
)
def test_a_wrong_vonage_setting_is_reported_by_name(changes: dict[str, Any], named: str) -> None:
    [problem] = problems(vonage=vonage_table(**changes))
    assert problem.startswith("carriers.vonage: ")
    assert named in problem


def test_a_plivo_table_needs_its_auth_id_token_and_sender() -> None:
    table = {"kind": "http", "provider": "plivo", "auth_id": "MA0123", "auth_token": "t"}
    assert problems(plivo={**table, "sender": "14155550100"}) == []
    [missing] = problems(plivo=table)
    assert "sender" in missing
    [wrong] = problems(plivo={**table, "sender": "x", "auth_id": "MA/../x"})
    assert "auth_id" in wrong


@pytest.mark.parametrize("versions", [[], ["v4"], ["v3", "v3"], "v3"])
def test_plivo_signature_versions_must_name_v3_v2_or_both_once(versions: object) -> None:
    table = {"kind": "http", "provider": "plivo", "auth_id": "MA0123", "auth_token": "t"}
    [wrong] = problems(plivo={**table, "sender": "1415", "signature_versions": versions})
    assert "signature_versions" in wrong


def test_plivo_signature_versions_are_read_as_the_config_file_lists_them() -> None:
    table = {"kind": "http", "provider": "plivo", "auth_id": "MA0123", "auth_token": "t"}
    for versions in (["v3"], ["v2"], ["v2", "v3"]):
        assert problems(plivo={**table, "sender": "1415", "signature_versions": versions}) == []


def test_plivo_v2_signs_the_url_without_its_query_then_the_nonce() -> None:
    signed = "https://r.example:8443/cb12345"
    expected = base64.b64encode(hmac.new(b"tok", signed.encode(), hashlib.sha256).digest())
    assert plivo_signature_v2("tok", "https://r.example:8443/cb?relay=1", "12345") == (
        expected.decode()
    )


def test_plivo_v3_signs_the_url_with_its_query_then_the_sorted_form_then_the_nonce() -> None:
    form = {"Status": "delivered", "MessageUUID": "m-1"}
    signed = "https://r.example/cb?a=1&b=2.MessageUUIDm-1Statusdelivered.n0nce"
    expected = base64.b64encode(hmac.new(b"tok", signed.encode(), hashlib.sha256).digest())
    assert plivo_signature_v3("tok", "https://r.example/cb?b=2&a=1", form, "n0nce") == (
        expected.decode()
    )


def test_a_sinch_table_needs_a_signature_or_a_callback_secret() -> None:
    table = {"kind": "http", "provider": "sinch", "service_plan_id": "p1", "api_token": "t"}
    table["sender"] = "Relay"
    assert problems(sinch={**table, "callback_secret": "c"}) == []
    assert problems(sinch={**table, "signature_secret": "s"}) == []
    [missing] = problems(sinch=table)
    assert "callback_secret" in missing


def test_an_infobip_table_needs_a_callback_secret() -> None:
    table = {"kind": "http", "provider": "infobip", "api_key": "k", "sender": "Relay"}
    assert problems(infobip={**table, "callback_secret": "c"}) == []
    [missing] = problems(infobip=table)
    assert "callback_secret" in missing


def test_an_unknown_provider_is_reported_with_the_ones_relay_knows() -> None:
    [problem] = problems(other=telnyx_table(provider="carrier-pigeon"))
    assert "provider must be one of" in problem
    assert "'telnyx'" in problem


def test_a_placeholder_api_key_is_unsafe_in_live_mode() -> None:
    settings = Settings(carriers={"telnyx": telnyx_table(api_key="change-me")})
    assert "carriers.telnyx.api_key is a placeholder secret" in unsafe_for_live(settings)


def test_the_callback_url_defaults_to_relays_own_route_for_the_carrier() -> None:
    settings = Settings(public_url="https://relay.example.com/", carriers={"tx": telnyx_table()})
    carrier = build_carriers(settings).carriers["tx"]
    assert isinstance(carrier, HttpCarrier)
    assert carrier.status_callback_url == "https://relay.example.com/v1/carriers/tx/status"


def test_a_secret_joins_a_callback_url_as_one_more_query_parameter() -> None:
    url = url_with_secret("https://relay.example.com/cb?x=1", "s&=cret")
    assert url == f"https://relay.example.com/cb?x=1&{SECRET_PARAM}=s%26%3Dcret"


def test_the_signature_matches_vonages_own_sdk_example() -> None:
    # Vonage's Python SDK test: these parameters, secret "secret", MD5 hash.
    params = {"a": "1", "b": "2", "timestamp": "1461605396"}
    assert vonage_signature(params, "secret", "md5hash") == "6af838ef94998832dbfc29020b564830"
