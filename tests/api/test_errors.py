"""Every failure answers in the contract's error envelope, with the right status and code."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.services import build_services
from relay.web.app import create_app
from tests.harness import RunningServer, test_settings

URL = "/v1/verifications"
NUMBER = "+14155552671"
JSON = {"Content-Type": "application/json"}
ANY_PARAM = "<any>"

# The contract's error table, plus the codes the middleware answers with (415, 405).
DOCUMENTED_CODES = [
    "parameter_missing",
    "parameter_invalid",
    "parameter_unknown",
    "phone_number_invalid",
    "phone_number_unsupported",
    "country_not_allowed",
    "invalid_json",
    "authentication_failed",
    "https_required",
    "resource_missing",
    "route_not_found",
    "verification_approved",
    "verification_expired",
    "verification_canceled",
    "max_attempts_reached",
    "idempotency_key_in_use",
    "body_too_large",
    "idempotency_key_reused",
    "rate_limited",
    "max_sends_reached",
    "resend_too_soon",
    "internal_error",
    "no_route_available",
    "content_type_invalid",
    "method_not_allowed",
]


def error_of(
    response: httpx.Response,
    status: int,
    code: str,
    *,
    param: str | None = None,
    kind: str = "invalid_request_error",
) -> dict[str, Any]:
    """Assert the envelope `{"error": {type, code, message, doc_url[, param]}}` and return it.

    `param=None` means the error must not name a parameter; ANY_PARAM that it names one.
    """
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers.get("request-id", "").startswith("req_"), dict(response.headers)
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) - {"param"} == {"type", "code", "message", "doc_url"}
    assert error["type"] == kind
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    host = response.request.headers["host"]
    assert error["doc_url"] == f"https://{host}/docs/errors#{code}"
    if param is None:
        assert "param" not in error
    elif param == ANY_PARAM:
        assert isinstance(error.get("param"), str)
        assert error["param"]
    else:
        assert error.get("param") == param
    return error


def names_field(error: dict[str, Any], field: str) -> bool:
    """True when `param` is the field or a path inside it (`metadata.user`)."""
    param = str(error.get("param"))
    return param == field or param.startswith(field + ".")


def create(api: httpx.Client, **fields: Any) -> httpx.Response:
    return api.post(URL, json={"to": NUMBER, **fields})


def listed(api: httpx.Client) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = api.get(URL).json()["data"]
    return data


@pytest.fixture
def anonymous(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        yield client


# Bodies


@pytest.mark.parametrize("raw", [b'{"to": "+1415', b'{"to": }', b"{'to': '+14155552671'}", b"\xff"])
def test_malformed_json_is_invalid_json(api: httpx.Client, raw: bytes) -> None:
    error_of(api.post(URL, content=raw, headers=JSON), 400, "invalid_json")
    assert listed(api) == []


@pytest.mark.parametrize("raw", [b"[]", b'["+14155552671"]', b'"+14155552671"', b"42"])
def test_a_json_body_that_is_not_an_object_is_refused(api: httpx.Client, raw: bytes) -> None:
    error_of(api.post(URL, content=raw, headers=JSON), 400, "parameter_invalid")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_json_body_sent_as_another_media_type_is_415(
    api: httpx.Client, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = api.post(URL, content=b'{"to": "+14155552671"}', headers=headers)
    error_of(response, 415, "content_type_invalid")
    assert listed(api) == []


def test_a_charset_parameter_on_application_json_is_fine(api: httpx.Client) -> None:
    response = api.post(
        URL,
        content=b'{"to": "+14155552671"}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200, response.text


def test_an_unknown_field_is_refused_and_named(api: httpx.Client) -> None:
    error_of(create(api, colour="blue"), 400, "parameter_unknown", param="colour")


def test_a_missing_to_is_parameter_missing(api: httpx.Client) -> None:
    response = api.post(URL, json={"metadata": {"user": "42"}})
    error_of(response, 400, "parameter_missing", param="to")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"to": 123}, "to"),
        ({"to": None}, "to"),
        ({"code_length": "6"}, "code_length"),
        ({"code_length": 6.5}, "code_length"),
        ({"ttl": "600"}, "ttl"),
        ({"locale": 1}, "locale"),
        ({"webhook_url": 1}, "webhook_url"),
        ({"metadata": "user=42"}, "metadata"),
        ({"metadata": ["user"]}, "metadata"),
        ({"metadata": {"user": 42}}, "metadata"),
        ({"metadata": {"user": None}}, "metadata"),
        ({"metadata": {"user": {"id": "42"}}}, "metadata"),
    ],
)
def test_a_field_of_the_wrong_type_is_parameter_invalid(
    api: httpx.Client, fields: dict[str, Any], field: str
) -> None:
    error = error_of(create(api, **fields), 400, "parameter_invalid", param=ANY_PARAM)
    assert names_field(error, field), error
    assert listed(api) == []


@pytest.mark.parametrize(
    "metadata",
    [
        {f"k{i}": "v" for i in range(21)},
        {"k" * 41: "v"},
        {"k": "v" * 501},
    ],
    ids=["21-keys", "41-char-key", "501-char-value"],
)
def test_metadata_over_its_limits_is_refused(api: httpx.Client, metadata: dict[str, str]) -> None:
    error = error_of(create(api, metadata=metadata), 400, "parameter_invalid", param=ANY_PARAM)
    assert names_field(error, "metadata"), error


def test_metadata_at_its_limits_is_accepted(api: httpx.Client) -> None:
    metadata = {f"{i:02d}" + "k" * 38: "v" * 500 for i in range(20)}
    response = create(api, metadata=metadata)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"] == metadata


@pytest.mark.parametrize(
    ("field", "value"), [("code_length", 3), ("code_length", 11), ("ttl", 59), ("ttl", 3601)]
)
def test_code_length_and_ttl_out_of_range_are_refused(
    api: httpx.Client, field: str, value: int
) -> None:
    error_of(create(api, **{field: value}), 400, "parameter_invalid", param=field)


def test_code_length_and_ttl_at_their_bounds_are_accepted(api: httpx.Client) -> None:
    for i, (code_length, ttl) in enumerate([(4, 60), (10, 3600)]):
        response = create(api, to=f"+1415555{i:04d}", code_length=code_length, ttl=ttl)
        assert response.status_code == 200, response.text
        assert response.json()["code_length"] == code_length


@pytest.mark.parametrize("locale", ["klingon", "12", "en-", "e1", "en-GB-x-foo"])
def test_a_malformed_locale_is_refused(api: httpx.Client, locale: str) -> None:
    error_of(create(api, locale=locale), 400, "parameter_invalid", param="locale")


@pytest.mark.parametrize("locale", ["xx", "fi-FI", "tlh"])
def test_a_language_without_a_template_falls_back_to_english(
    api: httpx.Client, locale: str
) -> None:
    response = create(api, locale=locale)
    assert response.status_code == 200, response.text
    assert response.json()["locale"] == "en"


def test_a_regional_locale_resolves_to_its_language(api: httpx.Client) -> None:
    response = create(api, locale="pt-BR")
    assert response.status_code == 200, response.text
    assert response.json()["locale"] == "pt"


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",
        "ftp://example.com/hook",
        "https://user:secret@example.com/hook",
        "https://user@example.com/hook",
        "https://example.com/" + "a" * (2049 - len("https://example.com/")),
        "https://10.0.0.1/x",
        "https://127.0.0.1/x",
        "https://169.254.169.254/latest/meta-data",
        "https://192.168.1.1/x",
        "https://[::1]/x",
        "https://[::ffff:10.0.0.1]/x",
        "https://2130706433/x",
        "https://127\u30020\u30020\u30021/x",
        "not a url",
    ],
    ids=[
        "http",
        "ftp",
        "userinfo",
        "username",
        "2049-chars",
        "10/8",
        "loopback",
        "metadata",
        "192.168/16",
        "ipv6-loopback",
        "ipv4-mapped-private",
        "decimal-loopback",
        "ideographic-dot-loopback",
        "garbage",
    ],
)
def test_an_unusable_webhook_url_is_refused(api: httpx.Client, url: str) -> None:
    error_of(create(api, webhook_url=url), 400, "parameter_invalid", param="webhook_url")
    assert listed(api) == []


def test_a_webhook_url_of_2048_characters_is_accepted(api: httpx.Client) -> None:
    url = "https://example.com/" + "a" * (2048 - len("https://example.com/"))
    response = create(api, webhook_url=url)
    assert response.status_code == 200, response.text
    assert response.json()["webhook_url"] == url


# Numbers


@pytest.mark.parametrize(
    "to", ["+1415", "4155552671", "+1415555abcd", "+1 415 555 2671", "", "+14155552671 ", "+11"]
)
def test_an_invalid_number_is_phone_number_invalid(api: httpx.Client, to: str) -> None:
    error_of(create(api, to=to), 400, "phone_number_invalid", param="to")


def test_a_premium_rate_number_is_unsupported(api: httpx.Client) -> None:
    error_of(create(api, to="+19005550100"), 400, "phone_number_unsupported", param="to")
    assert listed(api) == []


def test_a_sandbox_number_is_accepted_with_a_test_key(api: httpx.Client) -> None:
    response = create(api, to="+15005550006")
    assert response.status_code == 200, response.text
    assert response.json()["to"] == "+15005550006"


def test_a_sandbox_number_is_refused_with_a_live_key_before_any_route_lookup(
    live_api: httpx.Client,
) -> None:
    # The number check runs first: an unsupported number never reaches "no route".
    error_of(create(live_api, to="+15005550006"), 400, "phone_number_unsupported", param="to")
    error_of(create(live_api, to="+19005550100"), 400, "phone_number_unsupported", param="to")
    error_of(create(live_api), 503, "no_route_available", kind="api_error")
    assert listed(live_api) == []


# Size limits


def test_a_body_over_64_kib_with_content_length_is_413(api: httpx.Client) -> None:
    body = b'{"to": "+14155552671", "metadata": {"k": "' + b"a" * 70_000 + b'"}}'
    response = api.post(URL, content=body, headers=JSON)
    assert response.request.headers["content-length"] == str(len(body))
    error_of(response, 413, "body_too_large")
    assert listed(api) == []


def test_a_chunked_body_over_64_kib_is_413(api: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"to": "+14155552671", "metadata": {"k": "'
        for _ in range(7):
            yield b"a" * 10_240
        yield b'"}}'

    response = api.post(URL, content=chunks(), headers=JSON)
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in response.request.headers
    error_of(response, 413, "body_too_large")
    assert listed(api) == []


def test_a_body_of_exactly_64_kib_is_read(api: httpx.Client) -> None:
    start = b'{"to": "+14155552671"'
    body = start + b" " * (64 * 1024 - len(start) - 1) + b"}"
    assert len(body) == 64 * 1024
    assert api.post(URL, content=body, headers=JSON).status_code == 200
    too_big = start + b" " * (64 * 1024 - len(start)) + b"}"
    error_of(api.post(URL, content=too_big, headers=JSON), 413, "body_too_large")


# Routes and methods


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/nothing"),
        ("GET", "/nothing"),
        ("POST", "/v2/verifications"),
        ("GET", "/v1/verifications/ver_01J00000000000000000000000/attempts"),
    ],
)
def test_an_unknown_route_is_route_not_found(api: httpx.Client, method: str, path: str) -> None:
    error_of(api.request(method, path), 404, "route_not_found")


def test_an_unknown_route_is_404_without_a_key_too(anonymous: httpx.Client) -> None:
    error_of(anonymous.get("/v1/nothing"), 404, "route_not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/v1/verifications"),
        ("PUT", "/v1/verifications"),
        ("PATCH", "/v1/verifications/check"),
        ("DELETE", "/v1/verifications/ver_01J00000000000000000000000"),
    ],
)
def test_a_wrong_method_is_405(api: httpx.Client, method: str, path: str) -> None:
    error_of(api.request(method, path), 405, "method_not_allowed")


# Check targets


def test_a_check_with_neither_id_nor_to_is_refused(api: httpx.Client) -> None:
    response = api.post(f"{URL}/check", json={"code": "000000"})
    error_of(response, 400, "parameter_missing", param=ANY_PARAM)


def test_a_check_with_both_id_and_to_is_refused(api: httpx.Client) -> None:
    verification = create(api).json()
    response = api.post(
        f"{URL}/check", json={"id": verification["id"], "to": NUMBER, "code": "000000"}
    )
    error_of(response, 400, "parameter_invalid", param=ANY_PARAM)
    assert api.get(f"{URL}/{verification['id']}").json()["remaining_checks"] == 5


def test_a_check_without_a_code_is_parameter_missing(api: httpx.Client) -> None:
    verification = create(api).json()
    response = api.post(f"{URL}/check", json={"id": verification["id"]})
    error_of(response, 400, "parameter_missing", param="code")


# Error reference pages and headers


@pytest.mark.parametrize("code", DOCUMENTED_CODES)
def test_the_error_reference_documents_every_code(anonymous: httpx.Client, code: str) -> None:
    response = anonymous.get("/docs/errors")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert f"id='{code}'" in response.text


def test_a_doc_url_leads_to_its_entry_without_a_key(
    api: httpx.Client, anonymous: httpx.Client
) -> None:
    for response, code in [
        (create(api, to="+1415"), "phone_number_invalid"),
        (api.get("/v1/nothing"), "route_not_found"),
        (anonymous.get(URL), "authentication_failed"),
    ]:
        doc_url = response.json()["error"]["doc_url"]
        assert doc_url.endswith(f"/docs/errors#{code}")
        page = anonymous.get(doc_url)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert f"id='{code}'" in page.text


def test_every_response_carries_a_request_id(
    api: httpx.Client, anonymous: httpx.Client, server: RunningServer
) -> None:
    responses = [
        create(api),
        api.get(URL),
        api.get(f"{URL}/ver_01J00000000000000000000000"),
        create(api, to="+1415"),
        api.post(URL, content=b"{", headers=JSON),
        api.post(URL, content=b"{}", headers={"Content-Type": "text/plain"}),
        api.delete(URL),
        api.get("/v1/nothing"),
        anonymous.get(URL),
        anonymous.get("/healthz"),
        anonymous.get("/docs"),
        anonymous.get("/docs/errors"),
        anonymous.get("/v1/openapi.json"),
    ]
    request_ids = [response.headers.get("request-id", "") for response in responses]
    assert all(request_id.startswith("req_") for request_id in request_ids), request_ids
    assert len(set(request_ids)) == len(request_ids)
    assert not any("Traceback" in response.text for response in responses)


# Unexpected failures


def test_an_unexpected_failure_is_a_bare_500_with_a_request_id(
    account: NewAccount, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = build_services(test_settings(tmp_path, database_url))

    async def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals: /srv/relay/db.py line 42")

    monkeypatch.setattr(services.verifications, "list", explode)
    app = create_app(services, background=False)

    async def exchange() -> httpx.Response:
        try:
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(
                transport=transport,
                base_url="https://testserver",
                headers={"Authorization": f"Bearer {account.test_key}"},
            ) as client:
                return await client.get(URL)
        finally:
            await services.close()

    response = asyncio.run(exchange())
    assert "secret internals" not in response.text
    error_of(response, 500, "internal_error", kind="api_error")


# Plain HTTP


def test_a_plain_http_request_is_refused_with_https_required_and_has_no_effect(
    api: httpx.Client, account: NewAccount, database_url: str, tmp_path: Path
) -> None:
    services = build_services(test_settings(tmp_path, database_url))
    app = create_app(services, background=False)
    headers = {"Authorization": f"Bearer {account.test_key}"}

    async def exchange() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://testserver", headers=headers
            ) as plain:
                refused = await plain.post(URL, json={"to": NUMBER})
                # X-Forwarded-Proto counts only from configured proxies; none are.
                forwarded = await plain.post(
                    URL, json={"to": NUMBER}, headers={"X-Forwarded-Proto": "https"}
                )
            async with httpx.AsyncClient(
                transport=transport, base_url="https://testserver", headers=headers
            ) as secure:
                accepted = await secure.post(URL, json={"to": "+14155550123"})
            return refused, forwarded, accepted
        finally:
            await services.close()

    refused, forwarded, accepted = asyncio.run(exchange())
    error_of(refused, 403, "https_required")
    error_of(forwarded, 403, "https_required")
    assert accepted.status_code == 200, accepted.text
    assert [item["to"] for item in listed(api)] == ["+14155550123"]


def test_plain_http_on_the_tls_port_gets_no_http_answer_and_has_no_effect(
    api: httpx.Client, account: NewAccount, server: RunningServer
) -> None:
    plain_url = server.base_url.replace("https://", "http://", 1)
    assert plain_url.startswith("http://")
    headers = {"Authorization": f"Bearer {account.test_key}"}
    with (
        httpx.Client(base_url=plain_url, headers=headers, timeout=5) as plain,
        pytest.raises(httpx.TransportError),
    ):
        plain.post(URL, json={"to": NUMBER})
    assert listed(api) == []
