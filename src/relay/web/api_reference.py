"""`/docs`: the API reference page, built from the OpenAPI document of the route table.

Each endpoint shows its parameters, its request body and its response body
field by field (type, whether required, constraints, meaning), then a curl
and a Python example.
"""

from __future__ import annotations

import html
import json
from typing import Any

from relay.web.docs import inline, page

# Bodies whose generated example (required fields) would not be a useful request.
EXAMPLE_BODIES: dict[str, dict[str, Any]] = {
    "CheckVerificationBody": {"id": "ver_…", "code": "000000"},
    "CreateVerificationBody": {"to": "+14155552671", "metadata": {"user_id": "42"}},
}
_CONSTRAINTS = (
    ("minimum", "≥ {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMinimum", "> {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("maxProperties", "at most {} entries"),
    ("pattern", "matches <code>{}</code>"),
    ("default", "default <code>{}</code>"),
)


def api_page(openapi: dict[str, Any]) -> str:
    schemas = openapi.get("components", {}).get("schemas", {})
    sections = [
        "<p>Machine-readable: <a href='/v1/openapi.json'>/v1/openapi.json</a>. "
        "Authenticate with <code>Authorization: Bearer sk_test_…</code>. "
        "Errors: <a href='/docs/errors'>/docs/errors</a>. The examples read the "
        "service's address from <code>RELAY_URL</code> and the key from "
        "<code>RELAY_KEY</code>.</p>"
    ]
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            sections.append(_operation(method.upper(), path, operation, schemas))
    sections.append("<h2>Objects</h2>")
    sections += [_schema(name, schema, schemas) for name, schema in sorted(schemas.items())]
    return page("Relay API reference", "".join(sections))


def _schema(name: str, schema: dict[str, Any], schemas: dict[str, Any]) -> str:
    title = f"<h3 id='schema-{html.escape(name)}'><code>{html.escape(name)}</code></h3>"
    if "properties" in schema:
        return title + _table("Fields", _fields(name, schemas))
    return f"{title}<p>{_type(schema)}</p>"


def _operation(method: str, path: str, operation: dict[str, Any], schemas: dict[str, Any]) -> str:
    parts = [
        f"<h3 id='{html.escape(operation.get('operationId', ''))}'>"
        f"<code>{method} {html.escape(path)}</code> {inline(operation.get('summary', ''))}</h3>",
        f"<p>{inline(operation.get('description', ''))}</p>",
    ]
    parameters = operation.get("parameters", [])
    if parameters:
        rows = [
            _row(p["name"], p.get("schema", {}), p.get("required", False), p) for p in parameters
        ]
        parts.append(_table("Parameters", rows, extra="in"))
    body_name = _ref_name(_json_schema(operation.get("requestBody", {})))
    if body_name:
        parts.append(_table(f"Request body <code>{body_name}</code>", _fields(body_name, schemas)))
    answer_name = _ref_name(_json_schema(operation.get("responses", {}).get("200", {})))
    if answer_name:
        parts.append(_table(f"Response <code>{answer_name}</code>", _fields(answer_name, schemas)))
    body = _example_body(body_name, schemas) if body_name else None
    parts.append(_examples(method, _example_path(path), body))
    return "".join(parts)


def _json_schema(node: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = node.get("content", {}).get("application/json", {}).get("schema", {})
    return found


def _ref_name(schema: dict[str, Any]) -> str:
    return str(schema.get("$ref", "")).rsplit("/", 1)[-1]


def _fields(name: str, schemas: dict[str, Any]) -> list[str]:
    schema = schemas.get(name, {})
    required = set(schema.get("required", []))
    return [
        _row(field, prop, field in required, prop)
        for field, prop in schema.get("properties", {}).items()
    ]


def _row(name: str, schema: dict[str, Any], required: bool, where: dict[str, Any]) -> str:
    location = f"<td>{html.escape(where['in'])}</td>" if "in" in where else ""
    return (
        f"<tr><td><code>{html.escape(name)}</code></td>{location}<td>{_type(schema)}</td>"
        f"<td>{'required' if required else 'optional'}</td><td>{_constraints(schema)}</td>"
        f"<td>{inline(where.get('description') or schema.get('description', ''))}</td></tr>"
    )


def _table(title: str, rows: list[str], *, extra: str | None = None) -> str:
    head = "<th>field</th>" + (f"<th>{extra}</th>" if extra else "")
    head += "<th>type</th><th></th><th>constraints</th><th>meaning</th>"
    return f"<h4>{title}</h4><table><tr>{head}</tr>{''.join(rows)}</table>"


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = html.escape(_ref_name(schema))
        return f"<a href='#schema-{name}'><code>{name}</code></a>"
    if "anyOf" in schema:
        kinds = [_type(option) for option in schema["anyOf"] if option.get("type") != "null"]
        nullable = len(kinds) < len(schema["anyOf"])
        return " or ".join(kinds) + (" or null" if nullable else "")
    if "enum" in schema:
        return "one of " + ", ".join(f"<code>{html.escape(str(v))}</code>" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        return f"object of {_type(schema['additionalProperties'])}"
    return html.escape(str(kind))


def _constraints(schema: dict[str, Any]) -> str:
    options = [schema, *schema.get("anyOf", [])]
    found = [
        template.format(html.escape(json.dumps(option[key]).strip('"')))
        for option in options
        for key, template in _CONSTRAINTS
        if key in option and option[key] is not None
    ]
    return "; ".join(found)


def _example_body(name: str, schemas: dict[str, Any]) -> dict[str, Any] | None:
    if name in EXAMPLE_BODIES:
        return EXAMPLE_BODIES[name]
    schema = schemas.get(name, {})
    body = {
        field: (prop.get("examples") or ["…"])[0]
        for field, prop in schema.get("properties", {}).items()
        if field in schema.get("required", [])
    }
    return body or None


def _example_path(path: str) -> str:
    return (
        path.replace("{verification_id}", "ver_…")
        .replace("{message_id}", "msg_…")
        .replace("{event_id}", "evt_…")
    )


def _examples(method: str, path: str, body: dict[str, Any] | None) -> str:
    data = json.dumps(body) if body is not None else None
    curl = [f'curl --cacert .relay/tls/cert.pem -X {method} "$RELAY_URL{path}"']
    curl.append('  -H "Authorization: Bearer $RELAY_KEY"')
    if data is not None:
        curl.append("  -H 'Content-Type: application/json'")
        curl.append(f"  -d '{data}'")
    call = f"relay.{method.lower()}({path!r}" + (f", json={body!r})" if body else ")")
    python = "\n".join(
        [
            "import os, ssl, httpx",
            "",
            "relay = httpx.Client(",
            '    base_url=os.environ["RELAY_URL"],',
            '    headers={"Authorization": f"Bearer {os.environ[\'RELAY_KEY\']}"},',
            '    verify=ssl.create_default_context(cafile=".relay/tls/cert.pem"),',
            ")",
            f"answer = {call}",
            "print(answer.status_code, answer.json())",
        ]
    )
    command = " \\\n".join(curl)
    return (
        f"<h4>curl</h4><pre><code>{html.escape(command)}</code></pre>"
        f"<h4>Python</h4><pre><code>{html.escape(python)}</code></pre>"
    )
