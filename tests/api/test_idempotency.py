"""Idempotency-Key: a retried POST gets the first answer, byte for byte, and no second SMS."""

from __future__ import annotations

import itertools
from datetime import timedelta

import httpx
import pytest

from relay.accounts.models import NewAccount, Scope
from relay.clock import OffsetClock
from relay.config import Settings
from relay.idempotency import claims
from relay.idempotency.claims import Pending
from relay.idempotency.models import fingerprint
from relay.services import build_services
from relay.verifications.service import CreateRequest
from relay.worker.sweeper import prune_once
from tests.harness import RunningServer, count_rows, create_account, run

NUMBER = "+14155552671"


def create(api: httpx.Client, key: str, to: str = NUMBER, **fields: object) -> httpx.Response:
    return api.post(
        "/v1/verifications", json={"to": to, **fields}, headers={"Idempotency-Key": key}
    )


def sms_to(server: RunningServer, number: str) -> int:
    return sum(1 for sms in server.services.sandbox.sent if sms.to == number)


def died_after_its_change(
    settings: Settings, account: NewAccount, key: str, request_hash: str, to: str
) -> str:
    """Another Relay process runs a create under `key` and dies before storing its answer:
    its change and the key committed together. Returns the verification it opened."""

    async def go() -> str:
        services = build_services(settings)
        try:
            caller = await services.accounts.authenticate(account.test_key)
            lease = services.clock.now() + timedelta(seconds=settings.idempotency_lease)
            token = claims.running(Pending(caller.scope, key, request_hash, lease))
            try:
                request = CreateRequest(
                    to=to, locale="en", code_length=6, ttl=600, metadata={}, webhook_url=None
                )
                created = await services.verifications.create(caller, request)
            finally:
                claims.done(token)
            return created.id
        finally:
            await services.close()

    return run(go())


def stored_keys(settings: Settings, scope: Scope) -> int:
    return count_rows(
        settings,
        "SELECT count(*) AS n FROM idempotency_keys WHERE account_id = :account",
        account=scope.account_id,
    )


_numbers = itertools.count(2700)


@pytest.fixture
def number() -> str:
    """A number per test: the session server's sandbox remembers every SMS it was given."""
    return f"+1415555{next(_numbers):04d}"


def test_a_retried_create_is_replayed_byte_for_byte_and_sends_one_sms(
    api: httpx.Client, server: RunningServer, number: str
) -> None:
    first = create(api, "order-1", to=number)
    again = create(api, "order-1", to=number)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert again.headers["request-id"] != first.headers["request-id"]
    assert sms_to(server, number) == 1


def test_a_different_request_under_the_same_key_is_refused_with_422(
    api: httpx.Client, number: str
) -> None:
    assert create(api, "k", to=number).status_code == 200
    response = create(api, "k", to=number, code_length=8)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "idempotency_error"
    assert error["code"] == "idempotency_key_reused"


def test_the_same_key_on_another_path_is_another_request(api: httpx.Client, number: str) -> None:
    created = create(api, "shared", to=number).json()
    response = api.post(
        "/v1/verifications/check",
        json={"id": created["id"], "code": "000000"},
        headers={"Idempotency-Key": "shared"},
    )
    assert response.status_code == 422


def test_keys_are_scoped_to_the_account(
    api: httpx.Client, server: RunningServer, number: str
) -> None:
    other = create_account(server.settings, "Other")
    assert create(api, "same-key", to=number).status_code == 200
    with server.client(other.test_key) as other_api:
        response = create(other_api, "same-key", to=number)
    assert response.status_code == 200
    assert "idempotent-replayed" not in response.headers


@pytest.mark.parametrize(
    "key", ["x" * 256, "", "caf\u00e9"], ids=["too-long", "empty", "not-ascii"]
)
def test_a_malformed_key_is_a_400_naming_the_header(api: httpx.Client, key: str) -> None:
    response = api.post(
        "/v1/verifications", json={"to": NUMBER}, headers={"Idempotency-Key": key.encode("latin-1")}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "parameter_invalid"
    assert error["param"] == "Idempotency-Key"


def test_a_400_is_not_stored_so_the_fixed_request_runs_under_the_same_key(
    api: httpx.Client, number: str
) -> None:
    assert create(api, "fix-me", to=number, code_length=99).status_code == 400
    response = create(api, "fix-me", to=number)
    assert response.status_code == 200
    assert "idempotent-replayed" not in response.headers


def test_a_401_is_not_stored(server: RunningServer, api: httpx.Client, number: str) -> None:
    with server.client("sk_test_" + "x" * 32) as stranger:
        assert create(stranger, "k401", to=number).status_code == 401
    assert create(api, "k401", to=number).status_code == 200


def test_a_429_is_not_stored_so_the_retry_after_waiting_runs(
    api: httpx.Client, server: RunningServer, number: str
) -> None:
    assert create(api, "first", to=number).status_code == 200
    server.clock.advance(10)
    refused = create(api, "resend", to=number)
    assert refused.status_code == 429
    server.clock.advance(int(refused.headers["retry-after"]))
    response = create(api, "resend", to=number)
    assert response.status_code == 200
    assert "idempotent-replayed" not in response.headers
    assert len(response.json()["attempts"]) == 2


def test_a_5xx_is_not_stored(live_api: httpx.Client) -> None:
    for _ in range(2):
        response = create(live_api, "live-1", to="+14155552671")
        assert response.status_code == 503
        assert "idempotent-replayed" not in response.headers


def test_a_404_is_stored_and_replayed(api: httpx.Client) -> None:
    body = {"id": "ver_" + "0" * 26, "code": "123456"}
    headers = {"Idempotency-Key": "missing"}
    first = api.post("/v1/verifications/check", json=body, headers=headers)
    again = api.post("/v1/verifications/check", json=body, headers=headers)
    assert first.status_code == again.status_code == 404
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"


def test_a_replayed_check_counts_no_extra_attempt(api: httpx.Client, number: str) -> None:
    created = create(api, "open", to=number).json()
    body = {"id": created["id"], "code": "111111"}
    headers = {"Idempotency-Key": "wrong-once"}
    first = api.post("/v1/verifications/check", json=body, headers=headers)
    again = api.post("/v1/verifications/check", json=body, headers=headers)
    assert first.json()["remaining_checks"] == 4
    assert again.content == first.content
    assert api.get(f"/v1/verifications/{created['id']}").json()["remaining_checks"] == 4


def test_a_retry_whose_unit_would_resend_finds_its_key_taken_and_sends_nothing(
    api: httpx.Client, server: RunningServer, number: str
) -> None:
    first = create(api, "resend-retry", to=number)
    # Past the resend interval, the retry's unit decides a resend (the sandbox answers it)
    # before its key's INSERT finds the first request's record: it rolls back whole.
    server.clock.advance(31)
    again = create(api, "resend-retry", to=number)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert sms_to(server, number) == 1
    shown = api.get(f"/v1/verifications/{first.json()['id']}").json()
    assert len(shown["attempts"]) == 1


def test_a_retry_the_pumping_guard_would_now_refuse_is_replayed_and_writes_no_block(
    api: httpx.Client, server: RunningServer, account: NewAccount
) -> None:
    prefix = "+1212557"
    first = create(api, "before-the-spike", to=f"{prefix}0000")
    for n in range(1, 30):  # 30 codes to one range, none used: the guard's threshold
        assert create(api, f"spike-{n}", to=f"{prefix}{n:04d}").status_code == 200
    again = create(api, "before-the-spike", to=f"{prefix}0000")
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    blocks = "SELECT count(*) AS n FROM destination_blocks WHERE account_id = :account"
    assert count_rows(server.settings, blocks, account=account.id) == 0
    refused = create(api, "after-the-spike", to=f"{prefix}0031")
    assert refused.json()["error"]["code"] == "destination_blocked"
    assert count_rows(server.settings, blocks, account=account.id) == 1


def test_a_retried_approval_is_replayed_and_approves_once(api: httpx.Client, number: str) -> None:
    created = create(api, "to-approve", to=number).json()
    body = {"id": created["id"], "code": "000000"}
    headers = {"Idempotency-Key": "approve-once"}
    first = api.post("/v1/verifications/check", json=body, headers=headers)
    again = api.post("/v1/verifications/check", json=body, headers=headers)
    assert first.json()["status"] == "approved"
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    events = api.get("/v1/events", params={"limit": 100}).json()["data"]
    approved = [e for e in events if e["type"] == "verification.approved"]
    assert [e["data"]["object"]["id"] for e in approved] == [created["id"]]


def test_a_retried_cancel_and_a_retried_message_are_replayed(
    api: httpx.Client, server: RunningServer, number: str
) -> None:
    created = create(api, "to-cancel", to=number).json()
    path = f"/v1/verifications/{created['id']}/cancel"
    headers = {"Idempotency-Key": "cancel-once"}
    first = api.post(path, headers=headers)
    again = api.post(path, headers=headers)
    assert first.json()["status"] == "canceled"
    assert (again.content, again.headers["idempotent-replayed"]) == (first.content, "true")

    other = f"+1415555{next(_numbers):04d}"
    body = {"to": other, "code": "4321"}
    headers = {"Idempotency-Key": "message-once"}
    sent = api.post("/v1/messages", json=body, headers=headers)
    resent = api.post("/v1/messages", json=body, headers=headers)
    assert sent.json()["status"] == "delivered"
    assert (resent.content, resent.headers["idempotent-replayed"]) == (sent.content, "true")
    assert sms_to(server, other) == 1


def test_a_key_whose_holder_died_after_its_change_is_409_then_answers_with_that_change(
    api: httpx.Client, server: RunningServer, account: NewAccount, number: str
) -> None:
    died_after_its_change(server.settings, account, "crashed", "hash-of-another-run", number)
    # The holder took the key for a different body: 422 beats the lease.
    assert create(api, "crashed", to=number).status_code == 422

    other = f"+1415555{next(_numbers):04d}"
    body = httpx.Request("POST", "https://x", json={"to": other}).content
    opened = died_after_its_change(
        server.settings,
        account,
        "crashed-2",
        fingerprint("POST", "/v1/verifications", b"", body),
        other,
    )
    busy = create(api, "crashed-2", to=other)
    assert busy.status_code == 409
    assert busy.json()["error"] == {
        "type": "idempotency_error",
        "code": "idempotency_key_in_use",
        "message": busy.json()["error"]["message"],
        "param": "Idempotency-Key",
        "doc_url": busy.json()["error"]["doc_url"],
    }
    server.clock.advance(server.settings.idempotency_lease + 1)
    recovered = create(api, "crashed-2", to=other)
    assert recovered.status_code == 200
    assert recovered.json()["id"] == opened
    assert recovered.headers["idempotent-replayed"] == "true"
    # The dead holder's one attempt (dispatched by whichever process claims it), and no other.
    assert len(recovered.json()["attempts"]) == 1
    again = create(api, "crashed-2", to=other)
    assert again.content == recovered.content


def test_a_retry_while_the_holders_lease_runs_changes_nothing(
    api: httpx.Client, server: RunningServer, account: NewAccount, number: str
) -> None:
    body = httpx.Request("POST", "https://x", json={"to": number}).content
    died_after_its_change(
        server.settings,
        account,
        "raced",
        fingerprint("POST", "/v1/verifications", b"", body),
        number,
    )
    assert create(api, "raced", to=number).status_code == 409
    listed = api.get("/v1/verifications", params={"to": number}).json()["data"]
    assert len(listed) == 1
    # The dead holder's one attempt (dispatched by whichever process claims it), and no other.
    assert len(listed[0]["attempts"]) == 1


def test_keys_are_kept_24_hours_then_pruned(
    api: httpx.Client, server: RunningServer, account: NewAccount, number: str
) -> None:
    assert create(api, "day-old", to=number).status_code == 200
    server.clock.advance(24 * 3600 + 1)
    # Past 24 h the key is free again, whether or not the prune already ran.
    assert create(api, "day-old", to=number, code_length=8).status_code == 200
    scope = Scope(account.id, livemode=False)
    assert stored_keys(server.settings, scope) == 1

    async def prune_a_day_later() -> None:
        clock = OffsetClock()
        clock.advance(2 * 24 * 3600 + 60)
        services = build_services(server.settings, clock=clock)
        try:
            await prune_once(services)
        finally:
            await services.close()

    run(prune_a_day_later())
    assert stored_keys(server.settings, scope) == 0


def test_get_requests_ignore_the_header(api: httpx.Client) -> None:
    response = api.get("/v1/verifications", headers={"Idempotency-Key": "x" * 300})
    assert response.status_code == 200
