"""`/docs` and `/docs/errors` say what the API really does, entry by entry."""

from __future__ import annotations

import re

import httpx

from relay.web.docs import catalogue
from relay.web.error_guide import GUIDE
from relay.web.errors import status_and_type
from tests.harness import RunningServer


def page(server: RunningServer, path: str) -> str:
    with server.client(None) as client:
        answer = client.get(path)
    assert answer.status_code == 200
    return answer.text


def row(text: str, code: str) -> str:
    found = re.search(rf"<tr id='{code}'>(.*?)</tr>", text)
    assert found is not None, f"no entry for {code}"
    return found[1]


def test_every_error_code_has_an_entry_with_its_real_status_cause_and_fix(
    server: RunningServer,
) -> None:
    text = page(server, "/docs/errors")
    assert catalogue(), "the catalogue is empty"
    for status, kind, code, _ in catalogue():
        entry = row(text, code)
        assert f"<td>{status}</td>" in entry, code
        assert f"<code>{kind}</code>" in entry, code
        cause, fix = GUIDE[code]
        assert cause, code
        assert fix, code


def test_internal_error_is_a_500_and_not_the_409_of_a_closed_verification(
    server: RunningServer,
) -> None:
    assert "<td>500</td>" in row(page(server, "/docs/errors"), "internal_error")


def test_the_catalogue_agrees_with_the_error_map_and_the_guide_has_no_stale_code() -> None:
    from relay import errors as e

    assert {code for *_, code, _ in catalogue()} == set(GUIDE)
    assert ("not_ready", 503) in {(code, status) for status, _, code, _ in catalogue()}
    assert status_and_type(e.InternalError())[0] == 500


def test_the_reference_renders_every_body_field_by_field_with_examples(
    server: RunningServer,
) -> None:
    text = page(server, "/docs")
    with server.client(None) as client:
        document = client.get("/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    operations = [(m, p, op) for p, ops in document["paths"].items() for m, op in ops.items()]
    for method, path, operation in operations:
        start = text.index(f"<h3 id='{operation['operationId']}'>")
        end = text.find("<h3", start + 1)
        section = text[start:end]
        assert f"{method.upper()} {path}" in section
        assert "<h4>curl</h4>" in section, path
        assert "<h4>Python</h4>" in section, path
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        name = body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
        for field in schemas.get(name, {}).get("properties", {}):
            assert f"<td><code>{field}</code></td>" in section, (path, field)


def test_the_reference_prints_no_backtick_literally(server: RunningServer) -> None:
    for path in ("/docs", "/docs/errors"):
        text = page(server, path)
        assert "`" not in text, path


def test_a_field_constraint_is_shown(server: RunningServer) -> None:
    text = page(server, "/docs")
    assert "≥ 60; ≤ 3600; default <code>600</code>" in text  # ttl of a create


def test_the_pages_need_no_key(server: RunningServer) -> None:
    assert httpx.get(f"{server.base_url}/docs", verify=server.tls_context()).status_code == 200
