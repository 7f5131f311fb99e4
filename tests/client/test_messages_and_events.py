"""The Send API and the events API through `relay_client.Relay`, against a live server."""

from __future__ import annotations

import pytest

from relay_client import NotFoundError, Relay
from tests.client.conftest import fresh_number
from tests.webhooks.receiver import wait_until


def test_send_delivers_the_callers_code_without_echoing_it(relay: Relay) -> None:
    to = fresh_number()
    message = relay.messages.send(to, code="A1B2C3", metadata={"order": "7"}, locale="de")
    assert message["id"].startswith("msg_")
    assert message["object"] == "message"
    assert message["to"] == to
    assert message["locale"] == "de"
    assert message["metadata"] == {"order": "7"}
    assert "A1B2C3" not in str(message)


def test_retrieve_returns_the_message_as_it_is_now(relay: Relay) -> None:
    sent = relay.messages.send(fresh_number(), code="482913")
    wait_until(
        lambda: relay.messages.retrieve(sent["id"])["status"] == "delivered",
        what="the sandbox delivery report",
    )
    retrieved = relay.messages.retrieve(sent["id"])
    assert retrieved["id"] == sent["id"]
    assert retrieved["attempts"][0]["status"] == "delivered"


def test_events_list_pages_through_an_objects_events(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    relay.verifications.check("000000", id=created["id"])
    wait_until(
        lambda: len(list(relay.events.list(related=created["id"]))) >= 3,
        what="sent, delivered and approved events",
    )
    events = list(relay.events.list(related=created["id"], limit=1))
    types = [event["type"] for event in events]
    assert types[0] == "verification.approved"
    assert sorted(types) == ["verification.approved", "verification.delivered", "verification.sent"]
    assert all(event["data"]["object"]["id"] == created["id"] for event in events)
    assert all(event["delivery_status"] == "none" for event in events)


def test_events_list_filters_by_type(relay: Relay) -> None:
    first = relay.verifications.create(fresh_number())
    second = relay.verifications.create(fresh_number())
    sent = [e["data"]["object"]["id"] for e in relay.events.list(type="verification.sent")]
    assert sent == [second["id"], first["id"]]


def test_events_retrieve_returns_one_event_with_its_delivery_state(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    (listed,) = relay.events.list(related=created["id"], type="verification.sent")
    event = relay.events.retrieve(listed["id"])
    assert event["id"] == listed["id"]
    assert event["type"] == "verification.sent"
    assert event["delivery_attempts"] == []


def test_erasures_create_deletes_what_names_a_number_and_says_how_much(relay: Relay) -> None:
    to = fresh_number()
    sent = relay.messages.send(to, code="482913")
    erasure = relay.erasures.create(to, idempotency_key=f"erase-{to}")
    assert erasure["object"] == "erasure"
    assert erasure["livemode"] is False
    assert erasure["to"] == f"{to[:5]}…{to[-2:]}"
    assert erasure["deleted"]["messages"] == 1
    assert erasure["deleted"]["attempts"] >= 1
    assert relay.erasures.create(to, idempotency_key=f"erase-{to}") == erasure
    with pytest.raises(NotFoundError):
        relay.messages.retrieve(sent["id"])
