"""The hostile input catalogue: every field of every endpoint, fed what an attacker or a
broken client sends, over real HTTPS. Each row names the answer the contract asks for.

Refusals change nothing: after each refused row the account has no verification.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

VERIFICATIONS = "/v1/verifications"
CHECK = "/v1/verifications/check"
MESSAGES = "/v1/messages"
NUMBER = "+14155552671"
SOME_ID = "ver_01J00000000000000000000000"
JSON = "application/json"

SQL = "'; DROP TABLE verifications; --"
CONTROL = "ab\x00\x1b[31m\r\nc"
LONG = "x" * 70_000  # past the 64 KiB body cap on its own
OVERLONG = "1" * 5_000  # long, inside the body cap
HUGE = 10**40
ARABIC_DIGITS = "+\u0661\u0664\u0661\u0665\u0665\u0665\u0665\u0662\u0666\u0667\u0661"
FULLWIDTH_DIGITS = "+\uff11\uff14\uff11\uff15\uff15\uff15\uff15\uff12\uff16\uff17\uff11"

CREATE = {"to": NUMBER}
CHECK_BODY = {"id": SOME_ID, "code": "000000"}
MESSAGE = {"to": NUMBER, "code": "1234"}


@dataclass(frozen=True)
class Row:
    name: str
    status: int
    code: str | None  # None: accepted
    path: str = VERIFICATIONS
    body: bytes | None = None
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": JSON})
    param: str | None = None


def with_field(base: dict[str, Any], name: str, value: Any) -> bytes:
    return json.dumps({**base, name: value}).encode()


def field_rows(
    endpoint: str, path: str, base: dict[str, Any], name: str, rows: list[tuple[str, Any, int, str]]
) -> list[Row]:
    return [
        Row(
            f"{endpoint} {name}: {label}",
            status,
            code,
            path,
            with_field(base, name, value),
            param=name if status == 400 and code.startswith("param") else None,
        )
        for label, value, status, code in rows
    ]


def text_field(
    endpoint: str, path: str, base: dict[str, Any], name: str, refusal: str, status: int = 400
) -> list[Row]:
    """The hostile values every string field must refuse: strings with `refusal`, other
    types as invalid. An opaque string (an id) is only ever not found: `status` 404."""
    return field_rows(
        endpoint,
        path,
        base,
        name,
        [
            ("overlong", OVERLONG, status, refusal),
            ("control characters", CONTROL, status, refusal),
            ("a number", 14155552671, 400, "parameter_invalid"),
            ("a huge integer", HUGE, 400, "parameter_invalid"),
            ("an object", {"$gt": ""}, 400, "parameter_invalid"),
            ("a list", [NUMBER], 400, "parameter_invalid"),
            ("SQL", SQL, status, refusal),
        ],
    )


def phone_rows(endpoint: str, path: str, base: dict[str, Any]) -> list[Row]:
    return text_field(endpoint, path, base, "to", "phone_number_invalid") + field_rows(
        endpoint,
        path,
        base,
        "to",
        [
            ("Arabic-Indic digits", ARABIC_DIGITS, 400, "phone_number_invalid"),
            ("fullwidth digits", FULLWIDTH_DIGITS, 400, "phone_number_invalid"),
            ("spaces", "+1 415 555 2671", 400, "phone_number_invalid"),
            ("a no-break space", "+1\u00a04155552671", 400, "phone_number_invalid"),
            ("no plus", "14155552671", 400, "phone_number_invalid"),
            ("a zero-width space", "+1415\u200b5552671", 400, "phone_number_invalid"),
            ("empty", "", 400, "phone_number_invalid"),
        ],
    )


def integer_rows(name: str) -> list[Row]:
    return field_rows(
        "create",
        VERIFICATIONS,
        CREATE,
        name,
        [
            ("a number as a string", "6", 400, "parameter_invalid"),
            ("a huge integer", HUGE, 400, "parameter_invalid"),
            ("a negative huge integer", -HUGE, 400, "parameter_invalid"),
            ("a float", 6.5, 400, "parameter_invalid"),
            ("true", True, 400, "parameter_invalid"),
            # Python's decoder reads the NaN token; the field still refuses it.
            ("NaN", float("nan"), 400, "parameter_invalid"),
            ("null", None, 400, "parameter_invalid"),
        ],
    )


def metadata_rows(endpoint: str, path: str, base: dict[str, Any]) -> list[Row]:
    return field_rows(
        endpoint,
        path,
        base,
        "metadata",
        [
            ("wide: 500 keys", {f"k{i}": "v" for i in range(500)}, 400, "parameter_invalid"),
            ("a nested object", {"a": {"b": {"c": "d"}}}, 400, "parameter_invalid"),
            ("a number value", {"a": 1}, 400, "parameter_invalid"),
            ("an overlong value", {"a": OVERLONG}, 400, "parameter_invalid"),
            ("an overlong key", {"k" * 41: "v"}, 400, "parameter_invalid"),
            ("a list", ["a"], 400, "parameter_invalid"),
            ("a string", "{}", 400, "parameter_invalid"),
        ],
    )


def url_rows(endpoint: str, path: str, base: dict[str, Any]) -> list[Row]:
    return text_field(endpoint, path, base, "webhook_url", "parameter_invalid") + field_rows(
        endpoint,
        path,
        base,
        "webhook_url",
        [
            ("header injection", "https://a.example/\r\nHost: evil", 400, "parameter_invalid"),
            ("plain http", "http://a.example/hook", 400, "parameter_invalid"),
            ("userinfo", "https://u:p@a.example/hook", 400, "parameter_invalid"),
            ("javascript", "javascript:alert(1)", 400, "parameter_invalid"),
        ],
    )


def locale_rows(endpoint: str, path: str, base: dict[str, Any]) -> list[Row]:
    return text_field(endpoint, path, base, "locale", "parameter_invalid")


def raw_rows(endpoint: str, path: str, good: bytes) -> list[Row]:
    """Whole-body hostility: the same for every POST with a body."""
    return [
        Row(f"{endpoint}: invalid UTF-8", 400, "invalid_json", path, good[:-2] + b'\xff"}'),
        Row(f"{endpoint}: UTF-16", 400, "invalid_json", path, good.decode().encode("utf-16")),
        Row(
            f"{endpoint}: a duplicate key",
            400,
            "invalid_json",
            path,
            good[:-1] + b", " + good[1:],
        ),
        Row(f"{endpoint}: deep nesting", 400, "invalid_json", path, b"[" * 5000 + b"]" * 5000),
        Row(f"{endpoint}: a list body", 400, "parameter_invalid", path, b"[" + good + b"]"),
        Row(f"{endpoint}: over 64 KiB", 413, "body_too_large", path, with_field({}, "to", LONG)),
        Row(
            f"{endpoint}: an unknown field",
            400,
            "parameter_unknown",
            path,
            good[:-1] + b', "x": 1}',
        ),
        Row(
            f"{endpoint}: __proto__",
            400,
            "parameter_unknown",
            path,
            good[:-1] + b', "__proto__": {}}',
        ),
        *(
            Row(
                f"{endpoint}: {kind}",
                415,
                "content_type_invalid",
                path,
                good,
                headers={"Content-Type": kind},
            )
            for kind in (
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/jsonx",
            )
        ),
    ]


def id_rows(path: str, method: str) -> list[Row]:
    """Hostile ids in the path: never found, never an error of another kind."""
    values = {
        "SQL": "ver_' OR '1'='1",
        "overlong": "ver_" + "0" * 3000,
        "a percent-encoded NUL": "ver_%00",
        "unicode digits": "ver_\u0661\u0662",
    }
    rows = [
        Row(
            f"{method} {path} id: {label}",
            404,
            "resource_missing",
            path.format(id=value),
            None,
            method,
            {},
        )
        for label, value in values.items()
    ]
    # Decoded, `..` leaves the route: no handler, so nothing to look up.
    traversal = path.format(id="..%2F..%2Fetc%2Fpasswd")
    return [
        *rows,
        Row(
            f"{method} {path}: path traversal", 404, "route_not_found", traversal, None, method, {}
        ),
    ]


ROWS = [
    *phone_rows("create", VERIFICATIONS, CREATE),
    *url_rows("create", VERIFICATIONS, CREATE),
    *metadata_rows("create", VERIFICATIONS, CREATE),
    *integer_rows("code_length"),
    *integer_rows("ttl"),
    *locale_rows("create", VERIFICATIONS, CREATE),
    *raw_rows("create", VERIFICATIONS, json.dumps(CREATE).encode()),
    *field_rows(
        "check",
        CHECK,
        CHECK_BODY,
        "code",
        [
            ("overlong", OVERLONG, 400, "parameter_invalid"),
            ("empty", "", 400, "parameter_invalid"),
            ("a number", 0, 400, "parameter_invalid"),
            ("a huge integer", HUGE, 400, "parameter_invalid"),
            ("a list", ["000000"], 400, "parameter_invalid"),
            # Any short string is a code to compare: here no verification matches.
            ("control characters", CONTROL, 404, "resource_missing"),
        ],
    ),
    *text_field("check", CHECK, CHECK_BODY, "id", "resource_missing", 404),
    *phone_rows("check", CHECK, {"code": "000000"}),
    *raw_rows("check", CHECK, json.dumps(CHECK_BODY).encode()),
    *phone_rows("message", MESSAGES, MESSAGE),
    *text_field("message", MESSAGES, MESSAGE, "code", "parameter_invalid"),
    *field_rows(
        "message",
        MESSAGES,
        MESSAGE,
        "code",
        [
            ("unicode digits", "\u0661\u0662\u0663\u0664", 400, "parameter_invalid"),
            ("too short", "123", 400, "parameter_invalid"),
        ],
    ),
    *url_rows("message", MESSAGES, MESSAGE),
    *metadata_rows("message", MESSAGES, MESSAGE),
    *locale_rows("message", MESSAGES, MESSAGE),
    *raw_rows("message", MESSAGES, json.dumps(MESSAGE).encode()),
    *id_rows(VERIFICATIONS + "/{id}", "GET"),
    *id_rows(VERIFICATIONS + "/{id}/cancel", "POST"),
    *id_rows(MESSAGES + "/{id}", "GET"),
    *id_rows("/v1/events/{id}", "GET"),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_each_hostile_input_gets_its_answer_and_changes_nothing(
    api: httpx.Client, row: Row
) -> None:
    response = api.request(row.method, row.path, content=row.body, headers=row.headers)

    assert response.status_code == row.status, response.text[:500]
    assert response.headers["content-type"].startswith(JSON)
    assert "Traceback" not in response.text
    if row.code is not None:
        error = response.json()["error"]
        assert error["code"] == row.code, error
        assert error["type"] == "invalid_request_error"
        if row.param is not None:
            assert str(error.get("param", "")).split(".")[0] == row.param, error
    assert api.get(VERIFICATIONS).json()["data"] == []


# A code is compared, never interpreted: look-alikes of the test code are wrong codes.
LOOK_ALIKES = {
    "Arabic-Indic zeros": "\u0660" * 6,
    "fullwidth zeros": "\uff10" * 6,
    "a trailing space": "000000 ",
    "a leading space": " 000000",
    "seven zeros": "0000000",
    "a NUL after it": "000000\x00",
    "SQL": "' OR ''='",
    "a LIKE wildcard": "%",
}


@pytest.mark.parametrize("code", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_a_hostile_code_is_a_wrong_code(api: httpx.Client, code: str) -> None:
    created = api.post(VERIFICATIONS, json=CREATE).json()

    response = api.post(CHECK, json={"id": created["id"], "code": code})

    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["verified"]) == ("pending", False)
    assert response.json()["remaining_checks"] == 4


HEADERS = {
    "Idempotency-Key of 256 characters": ({"Idempotency-Key": "k" * 256}, 400, "parameter_invalid"),
    "Idempotency-Key with a tab": ({"Idempotency-Key": "a\tb"}, 400, "parameter_invalid"),
    "Idempotency-Key not ASCII": ({"Idempotency-Key": "ключ".encode()}, 400, "parameter_invalid"),
    "Idempotency-Key empty": ({"Idempotency-Key": ""}, 400, "parameter_invalid"),
    "a key with SQL": ({"Authorization": f"Bearer sk_test_{SQL}"}, 401, "authentication_failed"),
    "an overlong key": (
        {"Authorization": "Bearer sk_test_" + "a" * 5000},
        401,
        "authentication_failed",
    ),
    "a key not ASCII": (
        {"Authorization": "Bearer sk_test_ключ".encode()},
        401,
        "authentication_failed",
    ),
    "a Basic key": ({"Authorization": "Basic c2tfdGVzdDo="}, 401, "authentication_failed"),
}


@pytest.mark.parametrize(("headers", "status", "code"), HEADERS.values(), ids=HEADERS.keys())
def test_each_hostile_header_gets_its_answer_and_changes_nothing(
    api: httpx.Client, headers: dict[str, Any], status: int, code: str
) -> None:
    response = api.post(VERIFICATIONS, json=CREATE, headers=headers)

    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert api.get(VERIFICATIONS).json()["data"] == []


QUERIES = {
    "limit as a huge integer": ("limit", str(HUGE)),
    "limit in Arabic-Indic digits": ("limit", "\u0661\u0660"),
    "limit negative": ("limit", "-1"),
    "status SQL": ("status", SQL),
    "to SQL": ("to", SQL),
    "to in fullwidth digits": ("to", FULLWIDTH_DIGITS),
    "starting_after SQL": ("starting_after", SQL),
    "ending_before overlong": ("ending_before", OVERLONG),
    "created[gte] with control characters": ("created[gte]", CONTROL),
    "created[lt] as a huge year": ("created[lt]", "99999-01-01T00:00:00Z"),
}


@pytest.mark.parametrize(("name", "value"), QUERIES.values(), ids=QUERIES.keys())
def test_each_hostile_list_parameter_is_refused_and_named(
    api: httpx.Client, name: str, value: str
) -> None:
    response = api.get(VERIFICATIONS, params={name: value})

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "parameter_invalid"
    assert response.json()["error"]["param"] == name
