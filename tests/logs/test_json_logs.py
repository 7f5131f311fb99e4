"""`relay serve --log-format json`: every line of a full scenario is one JSON object,
and none holds a code, a key, a secret or a full phone number."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from relay.log import JsonFormatter, begin_request, bind, end_request, masked
from tests.e2e.serving import relay_serve
from tests.harness import free_port
from tests.webhooks.receiver import isolated_database

NUMBERS = ("+14155552671", "+15005550001", "+14155550100", "+15005550004")
WRONG_CODE = "135792"
MESSAGE_CODE = "Q7W3Z9"


@pytest.mark.slow
def test_a_full_scenario_logs_only_parseable_lines_without_secrets(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "json_logs", tmp_path)
    env = {"RELAY_WEBHOOK_RETRY_SCHEDULE": "0.05", "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
    with relay_serve(tmp_path, url, "--log-format", "json", **env) as serving:
        key = serving.account["test_key"]
        hook = f"https://127.0.0.1:{free_port()}/hook?token=receiver-token"
        with serving.client(key) as api:
            ids = [
                api.post("/v1/verifications", json={"to": to, "webhook_url": hook}).json()
                for to in NUMBERS[:3]
            ]
            rejected = api.post("/v1/verifications", json={"to": NUMBERS[3]})
            assert rejected.status_code == 200, rejected.text
            wrong = api.post(
                "/v1/verifications/check", json={"id": ids[0]["id"], "code": WRONG_CODE}
            )
            assert wrong.json()["status"] == "pending"
            api.post("/v1/verifications/check", json={"to": NUMBERS[1], "code": "000000"})
            api.get("/v1/verifications", params={"to": NUMBERS[2]})
            sent = api.post("/v1/messages", json={"to": NUMBERS[0], "code": MESSAGE_CODE})
            assert sent.status_code == 200, sent.text
            api.post(
                "/v1/verifications",
                content=b"{not json",
                headers={"Content-Type": "application/json"},
            )
        with serving.client("sk_test_" + "x" * 32) as stranger:
            assert stranger.get("/v1/verifications").status_code == 401
        time.sleep(1.0)  # the failing webhook's retry, and its drop, get logged
    lines = serving.stderr.read_text().splitlines()
    assert lines
    entries = [json.loads(line) for line in lines]
    assert all(isinstance(entry, dict) for entry in entries)
    assert all({"time", "level", "action"} <= entry.keys() for entry in entries)
    requests = [entry for entry in entries if entry["action"] == "http.request"]
    assert len(requests) >= 10
    assert all(entry["request_id"].startswith("req_") for entry in requests)
    created = [entry for entry in requests if entry.get("verification_id") == ids[0]["id"]]
    assert created
    assert all(entry["account_id"] == serving.account["id"] for entry in created)
    assert any(entry.get("message_id", "").startswith("msg_") for entry in requests)
    assert any(entry["action"].startswith("webhooks.") for entry in entries)
    text = "\n".join(lines)
    forbidden = [
        *NUMBERS,
        *(number[1:] for number in NUMBERS),
        WRONG_CODE,
        MESSAGE_CODE,
        "000000",
        key,
        serving.account["live_key"],
        serving.account["test_webhook_secret"],
        serving.account["live_webhook_secret"],
        "sk_test_" + "x" * 32,
        "receiver-token",
    ]
    assert [value for value in forbidden if value in text] == []


def test_the_formatter_masks_what_a_careless_caller_passes() -> None:
    context = begin_request("req_1")
    try:
        bind(account_id="acct_1")
        record = logging.LogRecord(
            "relay.test", logging.WARNING, __file__, 1, "sent to %s", ("+14155552671",), None
        )
        record.to = "+33612345678"
        record.code = "123456"
        record.webhook_secret = "whsec_abc"
        record.api_key = "sk_live_abc"
        record.status_code = 500
        record.note = "key sk_live_abcdef and whsec_abcdef"
        entry = json.loads(JsonFormatter().format(record))
    finally:
        end_request(context)
    assert entry["action"] == "sent to …2671"
    assert entry["to"] == "…5678"
    assert entry["request_id"] == "req_1"
    assert entry["account_id"] == "acct_1"
    assert entry["status_code"] == 500
    assert {"code", "webhook_secret", "api_key"}.isdisjoint(entry)
    assert entry["note"] == "key sk_live_[redacted] and whsec_[redacted]"
    assert masked("ids ver_01ABC and port 8443 stay") == "ids ver_01ABC and port 8443 stay"
