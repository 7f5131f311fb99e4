"""The hostile input catalogue of the carrier callback routes: what anyone on the internet
can post to `/v1/carriers/{name}/status`, over real HTTPS, for a carrier of every provider
kind. Nothing is believed before its signature: each row gets a 4xx in the error shape,
no traceback is logged, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.carriers.every_provider import (
    CARRIERS,
    SIGNATURE_HEADERS,
    URL_SECRET,
    callback_state,
    every_provider_server,
    status_path,
)
from tests.harness import RunningServer, count_rows, create_account
from tests.webhooks.receiver import isolated_database

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
DEEP = b"[" * 60_000
NOT_ASCII = "sig\u00e9\u00ff".encode("latin-1")


@pytest.fixture(scope="module")
def hostile_server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "hostile_callbacks", tmp_path_factory.mktemp("db"))
    with every_provider_server(tmp_path_factory.mktemp("data"), url) as running:
        yield running


@pytest.fixture
def client(hostile_server: RunningServer) -> Iterator[httpx.Client]:
    with hostile_server.client(None) as made:
        yield made


def answered_in_shape(
    response: httpx.Response, caplog: pytest.LogCaptureFixture, status: int, code: str
) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith(JSON)
    assert response.json()["error"]["code"] == code
    assert "Traceback" not in response.text
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


def test_deep_json_to_a_signed_vonage_carrier_is_refused_without_a_traceback(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.post(
        status_path("vonage-signed"), content=DEEP, headers={"Content-Type": JSON}
    )

    answered_in_shape(response, caplog, 401, "authentication_failed")


def test_a_non_ascii_byte_in_telnyxs_signature_header_is_refused_without_a_traceback(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    headers = {
        "Content-Type": JSON,
        "telnyx-signature-ed25519": NOT_ASCII,
        "telnyx-timestamp": b"1700000000",
    }

    response = client.post(status_path("telnyx-signed"), content=b"{}", headers=headers)

    answered_in_shape(response, caplog, 401, "authentication_failed")


@dataclass(frozen=True)
class Row:
    name: str
    carrier: str
    status: int
    code: str
    body: bytes = b""
    headers: dict[str, str | bytes] = field(default_factory=lambda: {"Content-Type": JSON})
    query: str = ""
    method: str = "POST"


def every_header(value: str | bytes) -> dict[str, str | bytes]:
    return {"Content-Type": FORM, **dict.fromkeys(SIGNATURE_HEADERS, value)}


def body_rows(carrier: str) -> list[Row]:
    """Bodies nobody signed: refused as unsigned, whatever they hold."""
    unsigned = [
        ("deep JSON", DEEP, JSON),
        ("deep JSON objects", b'{"a":' * 5_000 + b"1" + b"}" * 5_000, JSON),
        ("invalid UTF-8 as JSON", b'{"status": "\xff\xfe"}', JSON),
        ("invalid UTF-8 as a form", b"status=\xff\xfe&MessageSid=\xc3", FORM),
        ("a lone surrogate", b'{"sig": "\\ud800", "status": "delivered"}', JSON),
        ("a number past a double", b'{"timestamp": 1e400, "sig": "00"}', JSON),
        ("a 5000-digit integer", b'{"timestamp": ' + b"9" * 5_000 + b"}", JSON),
        ("a JSON list", b'[{"status": "delivered"}]', JSON),
        ("a JSON string", b'"delivered"', JSON),
        ("not JSON", b"{not json", JSON),
        ("repeated and odd form keys", b"a=1&a=2&&=&%ff=%00&sig=&sig=x&Status=delivered", FORM),
        ("a form of 3000 keys", b"&".join(b"k%d=v" % i for i in range(3_000)), FORM),
        ("an empty JSON object", b"{}", JSON),
    ]
    rows = [
        Row(
            f"{carrier}: {label}",
            carrier,
            401,
            "authentication_failed",
            body,
            {"Content-Type": kind},
        )
        for label, body, kind in unsigned
    ]
    return [
        *rows,
        Row(f"{carrier}: an empty body", carrier, 401, "authentication_failed", headers={}),
        Row(
            f"{carrier}: a form over 64 KiB",
            carrier,
            413,
            "body_too_large",
            b"Status=" + b"d" * 70_000,
            {"Content-Type": FORM},
        ),
        *(
            Row(
                f"{carrier}: {kind}",
                carrier,
                415,
                "content_type_invalid",
                b"{}",
                {"Content-Type": kind},
            )
            for kind in ("text/plain", "multipart/form-data; boundary=x", "application/jsonx")
        ),
    ]


def header_rows(carrier: str) -> list[Row]:
    """Every provider's signature headers at once, holding what no provider sends. (Control
    bytes in a header never reach Relay: the server refuses the framing, decision 0027.)"""
    values: dict[str, str | bytes] = {
        "non-ASCII bytes": NOT_ASCII,
        "base64 that is not base64": "!!not*base64==",
        "base64 of the wrong length": "YQ==",
        "a 1 KiB value": "A" * 1_024,
        "NaN": "nan",
        "infinity": "1e400",
        "a list of commas": ",,,,",
    }
    rows = [
        Row(
            f"{carrier}: {label} in every signature header",
            carrier,
            401,
            "authentication_failed",
            b"a=b",
            every_header(value),
        )
        for label, value in values.items()
    ]
    odd_auth = {
        "a JWT that is not a JWT": "Bearer eyJhbGciOiJub25lIn0.not-json.",
        "a JWT of three dots": "Bearer ...",
        "an Authorization not ASCII": b"Bearer " + NOT_ASCII,
    }
    rows += [
        Row(
            f"{carrier}: {label}",
            carrier,
            401,
            "authentication_failed",
            b"{}",
            {"Content-Type": JSON, "Authorization": value},
        )
        for label, value in odd_auth.items()
    ]
    return rows


def query_rows(carrier: str) -> list[Row]:
    """What the URL may carry instead of the carrier's secret."""
    queries = {
        "a guessed relay_secret": "relay_secret=guessed",
        "a relay_secret not UTF-8": "relay_secret=%FF%FE",
        "a relay_secret with a NUL": "relay_secret=%00",
        "relay_secret twice": "relay_secret=a&relay_secret=b",
        "an empty relay_secret": "relay_secret=",
    }
    return [
        Row(f"{carrier}: {label}", carrier, 401, "authentication_failed", b"{}", query=query)
        for label, query in queries.items()
    ]


ROWS = [
    row
    for carrier in CARRIERS
    for row in (*body_rows(carrier), *header_rows(carrier), *query_rows(carrier))
] + [
    Row("an unknown carrier", "nobody", 404, "resource_missing", b"{}"),
    Row("a carrier name of dots", "..", 404, "route_not_found", b"{}"),
    Row("the sandbox, which takes no callback", "sandbox", 404, "resource_missing", b"{}"),
    Row(
        "a handshake with a token not ASCII",
        "whatsapp-signed",
        401,
        "authentication_failed",
        query="hub.mode=subscribe&hub.verify_token=%FF%00&hub.challenge=1",
        method="GET",
        headers={},
    ),
    Row(
        "a handshake without a token",
        "whatsapp-signed",
        401,
        "authentication_failed",
        query="hub.mode=subscribe&hub.challenge=1",
        method="GET",
        headers={},
    ),
    Row(
        "a handshake of a carrier that has none",
        "twilio-signed",
        404,
        "resource_missing",
        query="hub.mode=subscribe&hub.verify_token=x&hub.challenge=1",
        method="GET",
        headers={},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_each_hostile_callback_gets_its_answer_and_changes_nothing(
    client: httpx.Client,
    hostile_server: RunningServer,
    caplog: pytest.LogCaptureFixture,
    row: Row,
) -> None:
    before = callback_state(hostile_server)
    url = status_path(row.carrier) + (f"?{row.query}" if row.query else "")

    response = client.request(row.method, url, content=row.body or None, headers=row.headers)

    answered_in_shape(response, caplog, row.status, row.code)
    assert callback_state(hostile_server) == before


def test_a_callback_with_an_api_key_and_an_idempotency_key_is_still_only_a_callback(
    client: httpx.Client, hostile_server: RunningServer
) -> None:
    """Callbacks take no API key: whatever key they carry is not looked up, and nothing
    of the request is kept under its Idempotency-Key before the signature is checked."""
    account = create_account(hostile_server.settings)
    headers = {
        "Authorization": f"Bearer {account.test_key}",
        "Idempotency-Key": "callback-1",
        "Content-Type": JSON,
    }
    url = f"{status_path('vonage-url')}?relay_secret={URL_SECRET}"
    receipt = b'{"messageId": "0C00000000000001", "status": "accepted"}'

    answers = [client.post(url, content=receipt, headers=headers) for _ in range(2)]

    assert [a.status_code for a in answers] == [204, 204]
    assert "idempotent-replayed" not in answers[1].headers
    kept = "SELECT count(*) AS n FROM idempotency_keys WHERE account_id = :account"
    assert count_rows(hostile_server.settings, kept, account=account.id) == 0
