"""The Verify API through real HTTPS: create, resend, check, cancel, retrieve, expiry."""

from __future__ import annotations

from typing import Any

import httpx

from relay.accounts.models import NewAccount
from tests.harness import RunningServer

NUMBER = "+14155552671"


def create(api: httpx.Client, to: str = NUMBER, **fields: Any) -> httpx.Response:
    return api.post("/v1/verifications", json={"to": to, **fields})


def check(api: httpx.Client, code: str, **target: str) -> httpx.Response:
    return api.post("/v1/verifications/check", json={"code": code, **target})


def sent_code(server: RunningServer, to: str) -> str:
    """The code as the handset would read it, from the sandbox carrier's memory."""
    body = next(sms.body for sms in reversed(server.services.sandbox.sent) if sms.to == to)
    return next(word.rstrip(".") for word in body.split() if word.rstrip(".").isdigit())


def test_create_returns_a_pending_verification_with_every_spec_field(api: httpx.Client) -> None:
    response = create(api, metadata={"user": "42"})
    assert response.status_code == 200
    body = response.json()
    assert body["id"].startswith("ver_")
    assert len(body["id"]) == 30
    assert body["object"] == "verification"
    assert body["status"] == "pending"
    assert body["to"] == NUMBER
    assert body["country"] == "US"
    assert body["sender"] == "Acme"
    assert body["code_length"] == 6
    assert body["verified"] is False
    assert body["metadata"] == {"user": "42"}
    assert body["livemode"] is False
    assert body["remaining_checks"] == 5
    assert body["created_at"].endswith("Z")
    assert body["expires_at"] > body["created_at"]
    [attempt] = body["attempts"]
    assert attempt["id"].startswith("att_")
    assert attempt["status"] == "delivered"
    assert attempt["carrier"] == "sandbox"
    assert attempt["at"].endswith("Z")
    assert response.headers["request-id"].startswith("req_")


def test_the_sms_names_the_brand_and_carries_a_code_of_the_asked_length(
    api: httpx.Client, server: RunningServer
) -> None:
    create(api, code_length=8)
    code = sent_code(server, NUMBER)
    assert len(code) == 8
    sms = server.services.sandbox.sent[-1]
    assert sms.body == f"Your Acme verification code is {code}. Do not share it."


def test_ttl_sets_expires_at(api: httpx.Client) -> None:
    body = create(api, ttl=120).json()
    created = httpx_time(body["created_at"])
    assert (httpx_time(body["expires_at"]) - created).total_seconds() == 120


def httpx_time(value: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_a_second_create_for_the_number_resends_the_same_code_on_the_same_verification(
    api: httpx.Client, server: RunningServer
) -> None:
    first = create(api).json()
    code = sent_code(server, NUMBER)
    server.clock.advance(31)
    second = create(api).json()
    assert second["id"] == first["id"]
    assert second["expires_at"] == first["expires_at"]
    assert len(second["attempts"]) == 2
    assert sent_code(server, NUMBER) == code


def test_a_resend_within_30_seconds_is_refused_with_retry_after(
    api: httpx.Client, server: RunningServer
) -> None:
    create(api)
    server.clock.advance(10)
    response = create(api)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "resend_too_soon"
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert response.headers["retry-after"] == "20"
    server.clock.advance(20)
    assert create(api).status_code == 200


def test_a_sixth_send_is_refused_with_max_sends_reached(
    api: httpx.Client, server: RunningServer
) -> None:
    for _ in range(5):
        assert create(api).status_code == 200
        server.clock.advance(31)
    response = create(api)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "max_sends_reached"
    assert int(response.headers["retry-after"]) > 0


def test_the_fixed_test_code_approves_with_a_test_key(api: httpx.Client) -> None:
    verification = create(api).json()
    response = check(api, "000000", id=verification["id"])
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "approved"
    assert body["verified"] is True
    assert body["approved_at"] is not None


def test_the_generated_code_approves_too(api: httpx.Client, server: RunningServer) -> None:
    verification = create(api).json()
    body = check(api, sent_code(server, NUMBER), id=verification["id"]).json()
    assert body["status"] == "approved"


def test_a_check_by_number_targets_its_pending_verification(api: httpx.Client) -> None:
    create(api)
    body = check(api, "000000", to=NUMBER).json()
    assert body["status"] == "approved"
    assert body["to"] == NUMBER


def test_a_wrong_code_keeps_it_pending_and_uses_one_check(api: httpx.Client) -> None:
    verification = create(api).json()
    body = check(api, "123456", id=verification["id"]).json()
    assert body["status"] == "pending"
    assert body["verified"] is False
    assert body["remaining_checks"] == 4


def test_fifth_wrong_code_closes_the_verification(api: httpx.Client) -> None:
    verification = create(api).json()
    statuses = [check(api, "999999", id=verification["id"]).json()["status"] for _ in range(5)]
    assert statuses == ["pending"] * 4 + ["max_attempts_reached"]
    response = check(api, "000000", id=verification["id"])
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "max_attempts_reached"
    assert api.get(f"/v1/verifications/{verification['id']}").json()["remaining_checks"] == 0


def test_a_check_on_an_approved_verification_is_a_conflict_and_counts_nothing(
    api: httpx.Client,
) -> None:
    verification = create(api).json()
    check(api, "000000", id=verification["id"])
    response = check(api, "000000", id=verification["id"])
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "verification_approved"
    assert api.get(f"/v1/verifications/{verification['id']}").json()["remaining_checks"] == 4


def test_a_verification_past_its_ttl_is_expired_on_read_and_on_check(
    api: httpx.Client, server: RunningServer
) -> None:
    verification = create(api, ttl=60).json()
    server.clock.advance(61)
    assert api.get(f"/v1/verifications/{verification['id']}").json()["status"] == "expired"
    response = check(api, "000000", id=verification["id"])
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "verification_expired"
    assert api.get(f"/v1/verifications/{verification['id']}").json()["remaining_checks"] == 5


def test_a_new_create_after_expiry_opens_a_new_verification(
    api: httpx.Client, server: RunningServer
) -> None:
    first = create(api, ttl=60).json()
    server.clock.advance(61)
    second = create(api).json()
    assert second["id"] != first["id"]
    assert second["status"] == "pending"


def test_cancel_closes_a_pending_verification_and_repeating_it_changes_nothing(
    api: httpx.Client,
) -> None:
    verification = create(api).json()
    canceled = api.post(f"/v1/verifications/{verification['id']}/cancel")
    assert canceled.status_code == 200
    assert canceled.json()["status"] == "canceled"
    assert canceled.json()["canceled_at"] is not None
    again = api.post(f"/v1/verifications/{verification['id']}/cancel")
    assert again.status_code == 200
    assert again.json() == canceled.json()
    refused = check(api, "000000", id=verification["id"])
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "verification_canceled"


def test_cancelling_an_approved_verification_is_a_conflict(api: httpx.Client) -> None:
    verification = create(api).json()
    check(api, "000000", id=verification["id"])
    response = api.post(f"/v1/verifications/{verification['id']}/cancel")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "verification_approved"


def test_a_finished_verification_stays_readable(api: httpx.Client) -> None:
    verification = create(api).json()
    check(api, "000000", id=verification["id"])
    response = api.get(f"/v1/verifications/{verification['id']}")
    assert response.status_code == 200
    assert response.json()["status"] == "approved"


def test_another_accounts_verification_is_missing(api: httpx.Client, server: RunningServer) -> None:
    from tests.harness import create_account

    other = create_account(server.settings, "Other")
    with server.client(other.test_key) as other_api:
        verification = create(other_api).json()
    for response in (
        api.get(f"/v1/verifications/{verification['id']}"),
        check(api, "000000", id=verification["id"]),
        api.post(f"/v1/verifications/{verification['id']}/cancel"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "resource_missing"


def test_test_and_live_data_are_invisible_to_each_other(
    api: httpx.Client, live_api: httpx.Client
) -> None:
    verification = create(api).json()
    assert live_api.get(f"/v1/verifications/{verification['id']}").status_code == 404
    assert live_api.get("/v1/verifications").json()["data"] == []


def test_a_live_send_without_a_route_is_503_and_writes_nothing(
    live_api: httpx.Client, account: NewAccount
) -> None:
    response = create(live_api)
    assert response.status_code == 503
    assert response.json()["error"] == {
        "type": "api_error",
        "code": "no_route_available",
        "message": "No SMS route is configured for this destination.",
        "doc_url": response.json()["error"]["doc_url"],
    }
    assert live_api.get("/v1/verifications").json()["data"] == []


def test_an_unknown_id_is_missing(api: httpx.Client) -> None:
    response = api.get("/v1/verifications/ver_01J00000000000000000000000")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "resource_missing"
    assert api.get("/v1/verifications/not-an-id").status_code == 404
    assert check(api, "000000", id="ver_01J00000000000000000000000").status_code == 404
    assert check(api, "000000", to="+14155550000").status_code == 404
