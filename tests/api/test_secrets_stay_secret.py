"""No code and no API key in any log line, response or table."""

from __future__ import annotations

import logging

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.log import KeyValueFormatter
from tests.api.test_verifications import sent_code
from tests.harness import RunningServer, every_stored_value

NUMBER = "+14155552671"


def _dump_tables(server: RunningServer) -> str:
    rows: list[str] = []
    for value in every_stored_value(server.settings):
        rows.append(value.hex() if isinstance(value, bytes) else repr(value))
        if isinstance(value, bytes):
            rows.append(value.decode("latin-1"))
    return "\n".join(rows)


def test_codes_and_keys_appear_in_no_log_response_or_table(
    api: httpx.Client,
    server: RunningServer,
    account: NewAccount,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    responses = [api.post("/v1/verifications", json={"to": NUMBER, "code_length": 10})]
    code = sent_code(server, NUMBER)
    assert len(code) == 10
    verification_id = responses[0].json()["id"]
    responses += [
        api.post("/v1/verifications/check", json={"id": verification_id, "code": "0" * 10}),
        api.post("/v1/verifications/check", json={"id": verification_id, "code": code}),
        api.get(f"/v1/verifications/{verification_id}"),
        api.get("/v1/verifications"),
    ]
    assert responses[2].json()["status"] == "approved"

    formatter = KeyValueFormatter()
    logs = "\n".join(formatter.format(record) for record in caplog.records)
    assert "http.request" in logs, "the request log must be captured for this test to mean anything"
    texts = [response.text for response in responses]
    tables = _dump_tables(server)
    assert verification_id in tables, "the table dump must include the verification"
    for secret in (
        code,
        account.test_key,
        account.live_key,
        account.test_webhook_secret,
        account.live_webhook_secret,
    ):
        assert secret not in logs
        assert all(secret not in text for text in texts)
        assert secret not in tables
