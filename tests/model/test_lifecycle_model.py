"""Random sequences of creates, resends, checks, cancels, clock jumps, idempotent replays
and Send API calls, through the real app, against the reference model.

After every step: every answer and every event sequence equal the model's, at most
five checks are counted, at most one approval, nothing approved at or after expiry,
and a closed verification never reopens.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tests.model.driver import Answer, Relay, running_relay
from tests.model.profiles import chosen
from tests.model.reference import CHECK_LIMIT, Expected, Model, Request
from tests.webhooks.receiver import isolated_database

NUMBERS = ["+14155552671", "+14155552672", "+33612345678"]
KEYS = [None, None, "key-a", "key-b", "key-c"]
UNKNOWN = "ver_01J00000000000000000000000"
TERMINAL = {"approved", "expired", "canceled", "max_attempts_reached"}
CODES = ["right", "test", "wrong"]
# Negative: an id Relay never made.
PICKS = st.integers(-4, 40)
STEPS = [1, 10, 29, 30, 31, 59, 60, 61, 120, 599, 600, 3600, 86_400]


def shown(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[Relay]:
    # A database of its own: the sweep here and the suite's server must not meet.
    url = isolated_database(database_url, "model", tmp_path_factory.mktemp("db"))
    with running_relay(tmp_path_factory.mktemp("data"), url) as running:
        yield running


class Lifecycle(RuleBasedStateMachine):
    relay: Relay

    def __init__(self) -> None:
        super().__init__()
        self.relay.new_account()
        self.model = Model(self.relay.clock.now())
        self.keyed: list[tuple[str, Request]] = []
        self.seen: dict[str, str] = {}

    # --- the steps ---------------------------------------------------------------------

    @rule(
        to=st.sampled_from(NUMBERS),
        ttl=st.sampled_from([None, 60, 120, 3600]),
        key=st.sampled_from(KEYS),
    )
    def create(self, to: str, ttl: int | None, key: str | None) -> None:
        body: dict[str, Any] = {"to": to} if ttl is None else {"to": to, "ttl": ttl}
        self.post(Request("POST", "/v1/verifications", body), key)

    @rule(pick=PICKS, code=st.sampled_from(CODES), key=st.sampled_from(KEYS))
    def check_by_id(self, pick: int, code: str, key: str | None) -> None:
        target = self.pick(pick)
        body = {"id": target, "code": self.code(code, target)}
        self.post(Request("POST", "/v1/verifications/check", body), key)

    @rule(to=st.sampled_from(NUMBERS), code=st.sampled_from(CODES), key=st.sampled_from(KEYS))
    def check_by_number(self, to: str, code: str, key: str | None) -> None:
        target = self.model.open_for(to)
        body = {"to": to, "code": self.code(code, target.id if target else UNKNOWN)}
        self.post(Request("POST", "/v1/verifications/check", body), key)

    @rule(pick=PICKS, key=st.sampled_from(KEYS))
    def cancel(self, pick: int, key: str | None) -> None:
        self.post(Request("POST", f"/v1/verifications/{self.pick(pick)}/cancel", None), key)

    @rule(seconds=st.sampled_from(STEPS))
    def advance_the_clock(self, seconds: int) -> None:
        self.relay.clock.advance(seconds)
        self.model.now = self.relay.clock.now()

    @rule()
    def sweep(self) -> None:
        self.relay.sweep()
        self.model.sweep()

    @rule(
        to=st.sampled_from(NUMBERS),
        code=st.sampled_from(["1234", "A1b2C3", "0000000000"]),
        key=st.sampled_from(KEYS),
    )
    def send_a_message(self, to: str, code: str, key: str | None) -> None:
        self.post(Request("POST", "/v1/messages", {"to": to, "code": code}), key)

    @rule(pick=st.integers(0, 50), same=st.booleans())
    def replay_a_keyed_request(self, pick: int, same: bool) -> None:
        if not self.keyed:
            return
        key, request = self.keyed[pick % len(self.keyed)]
        self.post(request if same else altered(request), key)

    # --- one POST, with or without an Idempotency-Key ----------------------------------

    def post(self, request: Request, key: str | None) -> None:
        kept = self.model.kept(key) if key is not None else None
        answer = self.relay.request(request.method, request.path, request.body, idempotency_key=key)
        if kept is not None and kept.fingerprint == request.fingerprint():
            assert (answer.status, answer.content) == (kept.status, kept.content)
            assert answer.headers.get("idempotent-replayed") == "true"
            return
        if kept is not None:
            assert (answer.status, answer.error_code) == (422, "idempotency_key_reused"), answer
            return
        self.expect(request, answer)
        if key is not None:
            self.keyed.append((key, request))
            self.model.keep(key, request, answer.status, answer.content)

    def expect(self, request: Request, answer: Answer) -> None:
        body = request.body or {}
        if request.path == "/v1/verifications":
            expected = self.model.create(body["to"])
        elif request.path == "/v1/verifications/check":
            expected = self.model.check(
                body["code"], verification_id=body.get("id"), to=body.get("to")
            )
        elif request.path == "/v1/messages":
            expected = Expected(200)
        else:
            expected = self.model.cancel(request.path.split("/")[3])
        assert (answer.status, answer.error_code) == (expected.status, expected.code), answer
        assert "idempotent-replayed" not in answer.headers
        if expected.retry_after is not None:
            assert answer.headers["retry-after"] == str(expected.retry_after)
        if answer.status != 200:
            return
        shown_id: str = answer.json()["id"]
        if request.path == "/v1/messages":
            assert answer.json()["status"] == "delivered"
            self.model.sent_message(shown_id)
        elif expected.shows is None:
            assert shown_id not in self.model.verifications
            code = self.sent_code(body["to"])
            self.model.opened(shown_id, body["to"], code, body.get("ttl", 600))
        else:
            assert shown_id == expected.shows
        if shown_id.startswith("ver_"):
            self.agrees(answer.json())

    # --- what holds after every step ---------------------------------------------------

    @invariant()
    def every_verification_is_as_the_model_says(self) -> None:
        listed = self.relay.request("GET", "/v1/verifications", params={"limit": 100}).json()
        assert not listed["has_more"]
        found = {v["id"]: v for v in listed["data"]}
        assert set(found) == set(self.model.verifications)
        for shown_object in found.values():
            self.agrees(shown_object)
            status = shown_object["status"]
            previous = self.seen.get(shown_object["id"])
            assert previous not in TERMINAL or previous == status, (previous, status)
            self.seen[shown_object["id"]] = status

    @invariant()
    def every_event_sequence_is_as_the_model_says(self) -> None:
        events = self.all_events()
        for verification in self.model.verifications.values():
            types = events.pop(verification.id, [])
            assert types == verification.events, (verification.id, types)
            assert types.count("verification.approved") <= 1
        for message_id, expected in self.model.messages.items():
            assert events.pop(message_id, []) == expected
        assert events == {}

    def agrees(self, shown_object: dict[str, Any]) -> None:
        verification = self.model.verifications[shown_object["id"]]
        now = self.model.now
        status = verification.status_at(now)
        assert shown_object["status"] == status, (shown_object, verification)
        assert shown_object["remaining_checks"] == CHECK_LIMIT - verification.checks >= 0
        assert shown_object["verified"] is (status == "approved")
        assert len(shown_object["attempts"]) == verification.sends
        assert all(a["status"] == "delivered" for a in shown_object["attempts"])
        assert shown_object["expires_at"] == shown(verification.expires_at)
        assert shown_object["approved_at"] == shown(verification.approved_at)
        assert shown_object["canceled_at"] == shown(verification.canceled_at)
        if status == "approved":
            assert shown_object["approved_at"] < shown_object["expires_at"]

    # --- helpers -----------------------------------------------------------------------

    def pick(self, pick: int) -> str:
        ids = list(self.model.verifications)
        return UNKNOWN if pick < 0 or not ids else ids[pick % len(ids)]

    def code(self, kind: str, verification_id: str) -> str:
        found = self.model.verifications.get(verification_id)
        if kind == "test":
            return "000000"
        if kind == "right" and found is not None:
            return found.code
        wrong = "123456"
        return "654321" if found is not None and found.code == wrong else wrong

    def sent_code(self, to: str) -> str:
        """The code as the handset read it: the sandbox keeps every SMS it took."""
        sms = self.relay.services.sandbox.sent[-1]
        assert sms.to == to
        return next(w.rstrip(".") for w in sms.body.split() if w.rstrip(".").isdigit())

    def all_events(self) -> dict[str, list[str]]:
        """Every event of this account, oldest first, by the object it is about."""
        by_object: dict[str, list[str]] = {}
        params: dict[str, Any] = {"limit": 100}
        while True:
            page = self.relay.request("GET", "/v1/events", params=params).json()
            for event in page["data"]:
                by_object.setdefault(event["data"]["object"]["id"], []).insert(0, event["type"])
            if not page["has_more"]:
                return by_object
            params["starting_after"] = page["data"][-1]["id"]


def altered(request: Request) -> Request:
    """The same endpoint asked something else: a different body, or another object."""
    if request.body is None:
        return Request(request.method, request.path.replace("/cancel", "x/cancel"), None)
    if "code" in request.body:
        return Request(request.method, request.path, {**request.body, "code": "24680"})
    return Request(request.method, request.path, {**request.body, "metadata": {"again": "1"}})


def test_the_verification_lifecycle_follows_the_reference_model(relay: Relay) -> None:
    Lifecycle.relay = relay
    run_state_machine_as_test(Lifecycle, settings=chosen())
