"""The hostile input catalogue of the carrier callback routes: what anyone on the internet
can post to `/v1/carriers/{name}/status`, over real HTTPS, for a carrier of every provider
kind. Nothing is believed before its signature: each row gets a 4xx in the error shape,
no traceback is logged, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.carriers.every_provider import (
    every_provider_server,
    status_path,
)
from tests.harness import RunningServer
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
