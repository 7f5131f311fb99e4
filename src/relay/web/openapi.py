"""The OpenAPI 3.1 document, built once from the route table and its pydantic models."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from relay.idempotency.models import MAX_KEY_LENGTH
from relay.version import VERSION
from relay.web.bodies import MAX_DEPTH
from relay.web.middleware import MAX_BODY
from relay.web.operations import Operation
from relay.web.schemas import ErrorBody

SECURITY_SCHEME = "HTTPBearer"
_REF = "#/components/schemas/{model}"
_PATH_PARAMETER = re.compile(r"{([^}]+)}")

ERRORS: dict[int, str] = {
    400: "Invalid request: a bad parameter, or a body that is not a JSON object "
    f"(UTF-8, no duplicate keys, nested at most {MAX_DEPTH} deep)",
    401: "Authentication failed",
    403: "HTTPS required",
    404: "No such object or route",
    405: "Method not allowed; `Allow` lists the methods the path takes",
    409: "The verification is closed, or the idempotency key is in use",
    413: f"Body larger than {MAX_BODY // 1024} KiB",
    415: "Body is not application/json",
    422: "Idempotency key reused with another request",
    429: "Rate or send limit reached; see Retry-After",
    500: "Internal error",
    503: "No SMS route for the destination",
}

IDEMPOTENCY_KEY: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "Makes a retried POST safe: the first answer is stored for 24 hours and "
        "replayed byte for byte, with `Idempotent-Replayed: true`, and nothing is "
        "sent or written twice. Printable ASCII; the same key with another request "
        "answers 422."
    ),
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_KEY_LENGTH,
        "pattern": "^[ -~]+$",
    },
}


def build_document(operations: Iterable[Operation]) -> dict[str, Any]:
    listed = [operation for operation in operations if operation.in_schema]
    schemas = _schemas(listed)
    paths: dict[str, dict[str, Any]] = {}
    for operation in listed:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(
            operation, schemas
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Relay",
            "version": VERSION,
            "summary": "Send one-time passcodes by SMS and check them.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A secret key: sk_test_… or sk_live_….",
                }
            },
        },
    }


def _schemas(operations: list[Operation]) -> dict[str, Any]:
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {
        (ErrorBody, "serialization"): None
    }
    for operation in operations:
        for model in (operation.body, operation.query):
            if model is not None:
                wanted[model, "validation"] = None
        if operation.response is not None:
            wanted[operation.response, "serialization"] = None
    _, definitions = models_json_schema(list(wanted), ref_template=_REF)
    found: dict[str, Any] = definitions.get("$defs", {})
    return found


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _operation(operation: Operation, schemas: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {"operationId": operation.operation_id}
    if operation.tags:
        document["tags"] = list(operation.tags)
    if operation.summary:
        document["summary"] = operation.summary
    if operation.description:
        document["description"] = operation.description
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PATH_PARAMETER.findall(operation.path)
    ]
    if operation.query is not None:
        parameters += _query_parameters(schemas[operation.query.__name__])
    if operation.method == "POST":
        parameters.append(dict(IDEMPOTENCY_KEY))
    if parameters:
        document["parameters"] = parameters
    if operation.body is not None:
        document["requestBody"] = {
            "required": operation.body_required,
            "content": {"application/json": {"schema": _ref(operation.body)}},
        }
    success: dict[str, Any] = {"description": "Success"}
    if operation.response is not None:
        success["content"] = {"application/json": {"schema": _ref(operation.response)}}
    if operation.links:
        success["links"] = dict(operation.links)
    responses: dict[str, Any] = {str(operation.status): success}
    for status, text in ERRORS.items():
        responses[str(status)] = {
            "description": text,
            "content": {"application/json": {"schema": _ref(ErrorBody)}},
        }
    document["responses"] = responses
    if operation.authenticated:
        document["security"] = [{SECURITY_SCHEME: []}]
    return document


def _query_parameters(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", ()))
    parameters = []
    for name, found in schema.get("properties", {}).items():
        value = {k: v for k, v in found.items() if k not in ("title", "description", "default")}
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "description": found.get("description", ""),
                "schema": _without_null(value) | _default(found),
            }
        )
    return parameters


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent or text: `null` is no value it can take."""
    options = schema.get("anyOf")
    if options is None:
        return schema
    kept = [option for option in options if option.get("type") != "null"]
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return rest | kept[0] if len(kept) == 1 else rest | {"anyOf": kept}


def _default(schema: dict[str, Any]) -> dict[str, Any]:
    default = schema.get("default")
    return {} if default is None else {"default": default}
