"""The service describes itself: OpenAPI document, HTML reference, health check."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import httpx
import pytest

from tests.harness import RunningServer

OPERATIONS = [
    ("post", "/v1/verifications"),
    ("post", "/v1/verifications/check"),
    ("get", "/v1/verifications/{verification_id}"),
    ("post", "/v1/verifications/{verification_id}/cancel"),
    ("get", "/v1/verifications"),
]
WITH_BODY = [("/v1/verifications", "to"), ("/v1/verifications/check", "code")]
SUCCESS_SCHEMAS = {
    ("post", "/v1/verifications"): "VerificationObject",
    ("post", "/v1/verifications/check"): "VerificationObject",
    ("get", "/v1/verifications/{verification_id}"): "VerificationObject",
    ("post", "/v1/verifications/{verification_id}/cancel"): "VerificationObject",
    ("get", "/v1/verifications"): "VerificationList",
}


@pytest.fixture
def anonymous(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        yield client


@pytest.fixture
def document(anonymous: httpx.Client) -> dict[str, Any]:
    response = anonymous.get("/v1/openapi.json")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    return body


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    assert ref.startswith("#/components/schemas/")
    found: dict[str, Any] = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return found


def test_the_openapi_document_is_served_without_a_key_and_is_openapi_3(
    document: dict[str, Any],
) -> None:
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"]
    assert document["info"]["version"]


def test_the_openapi_document_carries_the_installed_package_version(
    document: dict[str, Any],
) -> None:
    assert document["info"]["version"] == version("relay-otp")


def test_it_lists_the_five_verification_operations(document: dict[str, Any]) -> None:
    listed = {
        (method, path)
        for path, operations in document["paths"].items()
        if path.startswith("/v1/verifications")
        for method in operations
    }
    assert listed == set(OPERATIONS)
    for method, path in OPERATIONS:
        assert document["paths"][path][method].get("summary"), (method, path)


@pytest.mark.parametrize(("path", "required"), WITH_BODY)
def test_create_and_check_describe_their_json_bodies(
    document: dict[str, Any], path: str, required: str
) -> None:
    body = document["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    schema = resolve(document, body["content"]["application/json"]["schema"])
    assert schema["type"] == "object"
    assert schema.get("additionalProperties") is False
    assert required in schema["required"]


def test_the_create_body_schema_states_the_contract_limits(document: dict[str, Any]) -> None:
    body = document["paths"]["/v1/verifications"]["post"]["requestBody"]
    schema = resolve(document, body["content"]["application/json"]["schema"])
    properties = schema["properties"]
    assert set(properties) == {
        "to",
        "channel",
        "channels",
        "webhook_url",
        "metadata",
        "code_length",
        "ttl",
        "locale",
    }
    assert schema["required"] == ["to"]
    assert properties["to"]["maxLength"] == 254
    channels = properties["channels"]["anyOf"][0]
    assert channels["uniqueItems"] is True
    assert set(resolve(document, channels["items"])["enum"]) == {"sms", "whatsapp", "email"}
    assert (properties["code_length"]["minimum"], properties["code_length"]["maximum"]) == (4, 10)
    assert (properties["ttl"]["minimum"], properties["ttl"]["maximum"]) == (60, 3600)
    assert properties["metadata"]["maxProperties"] == 20


def test_every_operation_requires_a_bearer_key(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    bearer = [
        name
        for name, scheme in schemes.items()
        if scheme.get("type") == "http" and scheme.get("scheme", "").lower() == "bearer"
    ]
    assert bearer, schemes
    for method, path in OPERATIONS:
        requirements = document["paths"][path][method].get("security", document.get("security"))
        assert requirements, (method, path)
        assert any(name in requirement for requirement in requirements for name in bearer)


def test_the_list_operation_documents_its_query_parameters(document: dict[str, Any]) -> None:
    parameters = document["paths"]["/v1/verifications"]["get"]["parameters"]
    assert {(p["name"], p["in"]) for p in parameters} >= {
        ("limit", "query"),
        ("starting_after", "query"),
        ("ending_before", "query"),
        ("status", "query"),
        ("to", "query"),
        ("created[gte]", "query"),
        ("created[lt]", "query"),
    }


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_success_and_error_responses_are_described_by_their_schemas(
    document: dict[str, Any], method: str, path: str
) -> None:
    responses = document["paths"][path][method]["responses"]
    success = responses["200"]["content"]["application/json"]["schema"]
    assert success.get("$ref") == f"#/components/schemas/{SUCCESS_SCHEMAS[method, path]}", success
    for status in ("400", "401"):
        error = responses[status]["content"]["application/json"]["schema"]
        assert error.get("$ref") == "#/components/schemas/ErrorBody"


def test_the_html_reference_names_every_path(anonymous: httpx.Client) -> None:
    response = anonymous.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    for method, path in OPERATIONS:
        assert f"{method.upper()} {path}" in response.text, (method, path)
    assert "/v1/openapi.json" in response.text
    assert "/docs/errors" in response.text


def test_healthz_answers_ok_without_a_key(anonymous: httpx.Client) -> None:
    response = anonymous.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert response.headers["request-id"].startswith("req_")


def test_every_post_declares_the_optional_idempotency_key_header(
    document: dict[str, Any],
) -> None:
    posts = [ops["post"] for ops in document["paths"].values() if "post" in ops]
    assert len(posts) >= 4
    for operation in posts:
        headers = [p for p in operation.get("parameters", []) if p["in"] == "header"]
        assert [(h["name"], h["required"]) for h in headers] == [("Idempotency-Key", False)]
        assert headers[0]["schema"]["maxLength"] == 255
    gets = [ops["get"] for ops in document["paths"].values() if "get" in ops]
    assert all(p["in"] != "header" for op in gets for p in op.get("parameters", []))


def body_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    body = document["paths"][path]["post"]["requestBody"]
    return resolve(document, body["content"]["application/json"]["schema"])


def test_check_states_that_it_takes_exactly_one_of_id_and_to(document: dict[str, Any]) -> None:
    schema = body_schema(document, "/v1/verifications/check")
    assert schema["required"] == ["code"]
    # Exactly one of the two is a string; the other is absent or null.
    by_field = {option["required"][0]: option["properties"] for option in schema["oneOf"]}
    assert by_field == {
        "id": {"id": {"type": "string"}, "to": {"type": "null"}},
        "to": {"to": {"type": "string"}, "id": {"type": "null"}},
    }


@pytest.mark.parametrize("path", ["/v1/verifications", "/v1/messages"])
def test_the_send_bodies_state_the_number_and_webhook_url_rules(
    document: dict[str, Any], path: str
) -> None:
    properties = body_schema(document, path)["properties"]
    e164 = r"^\+[1-9][0-9]{6,14}$"
    if path == "/v1/messages":
        assert properties["to"]["pattern"] == e164
    else:
        # A verification's destination is a number, or an email address for email.
        assert properties["to"]["anyOf"] == [{"pattern": e164}, {"format": "email"}]
        assert properties["to"]["maxLength"] == 254
    webhook = properties["webhook_url"]
    assert webhook["pattern"].startswith("^https://")
    assert {"type": "string", "maxLength": 2048} in webhook["anyOf"]
    assert "user name or password" in webhook["description"]
    metadata = properties["metadata"]
    assert metadata["maxProperties"] == 20
    assert metadata["propertyNames"] == {"minLength": 1, "maxLength": 40}
    assert metadata["additionalProperties"] == {"type": "string", "maxLength": 500}


def test_the_send_api_states_the_code_pattern(document: dict[str, Any]) -> None:
    properties = body_schema(document, "/v1/messages")["properties"]
    assert properties["code"]["pattern"] == "^[0-9A-Za-z]{4,10}$"


def test_list_filters_state_their_types_and_enums(document: dict[str, Any]) -> None:
    parameters = {
        p["name"]: p["schema"] for p in document["paths"]["/v1/verifications"]["get"]["parameters"]
    }
    assert parameters["limit"] == {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}
    status = resolve(document, parameters["status"])
    assert set(status["enum"]) == {
        "pending",
        "approved",
        "expired",
        "canceled",
        "max_attempts_reached",
    }
    assert parameters["created[gte]"]["format"] == "date-time"
    assert all("null" not in str(schema) for schema in parameters.values())
    events = {p["name"]: p["schema"] for p in document["paths"]["/v1/events"]["get"]["parameters"]}
    assert "verification.sent" in resolve(document, events["type"])["enum"]


def test_every_operation_documents_framing_refusals_with_the_error_body(
    document: dict[str, Any],
) -> None:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status in ("400", "404", "405", "413", "415", "429", "500"):
                schema = operation["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)


def test_creates_link_to_the_operations_that_use_their_id(document: dict[str, Any]) -> None:
    create = document["paths"]["/v1/verifications"]["post"]["responses"]["200"]["links"]
    assert {link["operationId"] for link in create.values()} == {
        "retrieve_verification",
        "cancel_verification",
        "check_verification",
    }
    send = document["paths"]["/v1/messages"]["post"]["responses"]["200"]["links"]
    assert {link["operationId"] for link in send.values()} == {"retrieve_message"}


def test_every_documented_operation_is_served(
    document: dict[str, Any], anonymous: httpx.Client
) -> None:
    for path, operations in document["paths"].items():
        concrete = path.replace("{", "x_").replace("}", "")
        for method in operations:
            response = anonymous.request(method.upper(), concrete)
            assert response.status_code == 401, (method, path, response.text)
