"""Generated requests at every provider's callback route, over real HTTPS: whatever comes,
the answer is a 2xx or a 4xx (never a 5xx, never a traceback), and nothing changes unless
the request was signed as the carrier's provider signs it.

Short in CI; `RELAY_FUZZ_PROFILE=long` runs many more examples.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.carriers.every_provider import (
    CARRIERS,
    SIGNATURE_HEADERS,
    callback_state,
    every_provider_server,
    signed,
    status_path,
)
from tests.harness import RunningServer
from tests.webhooks.receiver import isolated_database

EXAMPLES = {"ci": 60, "long": 1_000}[os.environ.get("RELAY_FUZZ_PROFILE", "ci")]
CONTENT_TYPES = [
    "application/json",
    "application/x-www-form-urlencoded",
    "application/json; charset=latin-1",
    "application/x-www-form-urlencoded; charset=utf-16",
    "text/plain",
    None,
]
# What a provider's payload is made of: its own field names among others.
NAMES = st.sampled_from(
    [
        "status",
        "Status",
        "MessageSid",
        "MessageStatus",
        "MessageUUID",
        "messageId",
        "sig",
        "timestamp",
        "nonce",
        "data",
        "payload",
        "entry",
        "results",
        "batch_id",
        "type",
        "id",
    ]
) | st.text(max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=20,
)


def header_value(raw: bytes) -> bytes:
    """`raw` as a header value can be framed: no control bytes, no outer whitespace."""
    return bytes(b for b in raw if b == 9 or 32 <= b <= 126 or b >= 128).strip(b" \t")


# Past the standard library decoder's recursion limit, and up to the 64 KiB body cap.
DEPTHS = st.sampled_from([2, 40, 999, 1_025, 5_000, 30_000])
BODIES = st.one_of(
    st.binary(max_size=3_000),
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(NAMES, st.text(max_size=40), max_size=12).map(
        lambda form: urlencode(form).encode()
    ),
    DEPTHS.map(lambda depth: b"[" * depth + b"]" * depth),
    DEPTHS.map(lambda depth: b"[" * depth),
    DEPTHS.map(lambda depth: b'{"data":' * depth + b"1" + b"}" * depth),
)
HEADERS = st.dictionaries(
    st.sampled_from([*SIGNATURE_HEADERS, "Authorization"]),
    st.binary(max_size=300).map(header_value),
    max_size=5,
)
QUERIES = st.one_of(
    st.just(""),
    st.dictionaries(st.sampled_from(["relay_secret", "hub.verify_token", "x"]), st.text()).map(
        urlencode
    ),
    st.binary(max_size=80).map(lambda raw: raw.hex()),
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "callback_fuzz", tmp_path_factory.mktemp("db"))
    with every_provider_server(tmp_path_factory.mktemp("data"), url) as running:
        yield running


@pytest.fixture(scope="module")
def client(fuzzed: RunningServer) -> Iterator[httpx.Client]:
    with fuzzed.client(None) as made:
        yield made


def post(
    client: httpx.Client,
    carrier: str,
    body: bytes,
    headers: dict[str, Any],
    query: str,
) -> httpx.Response:
    url = status_path(carrier) + (f"?{query}" if query else "")
    return client.post(url, content=body, headers=headers)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@pytest.mark.parametrize("carrier", list(CARRIERS))
@given(
    body=BODIES,
    headers=HEADERS,
    content_type=st.sampled_from(CONTENT_TYPES),
    query=QUERIES,
    sign=st.booleans(),
)
def test_no_generated_callback_gets_a_5xx_or_changes_anything_unsigned(
    client: httpx.Client,
    fuzzed: RunningServer,
    caplog: pytest.LogCaptureFixture,
    carrier: str,
    body: bytes,
    headers: dict[str, bytes],
    content_type: str | None,
    query: str,
    sign: bool,
) -> None:
    sent: dict[str, Any] = dict(headers)
    if content_type is not None:
        sent["Content-Type"] = content_type
    signature = signed(carrier, body) if sign else None
    if signature is not None:
        sent.update(signature[0])
        query = signature[1]
    before = callback_state(fuzzed)

    response = post(client, carrier, body, sent, query)

    assert response.status_code < 500, response.text[:300]
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    if response.status_code >= 400 and response.content:
        assert response.json()["error"]["code"], response.text[:300]
    if signature is None:
        assert 400 <= response.status_code < 500, response.text[:300]
        assert callback_state(fuzzed) == before


@settings(
    max_examples=EXAMPLES // 2,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.parametrize("carrier", list(CARRIERS))
@given(query=QUERIES, headers=HEADERS)
def test_no_generated_handshake_gets_a_5xx(
    client: httpx.Client,
    caplog: pytest.LogCaptureFixture,
    carrier: str,
    query: str,
    headers: dict[str, bytes],
) -> None:
    response = client.get(status_path(carrier) + (f"?{query}" if query else ""), headers=headers)

    assert response.status_code in {401, 404, 400}, response.text[:300]
    assert response.json()["error"]["code"]
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
