"""`AsyncRelay` drives the same endpoints as `Relay`, against the same live server."""

from __future__ import annotations

import pytest

from relay.accounts.models import NewAccount
from relay_client import AsyncRelay, ConflictError, NotFoundError, Relay
from tests.client.conftest import LiveRelay, fresh_number


async def test_the_verify_api_end_to_end(live: LiveRelay, keys: NewAccount) -> None:
    async with live.async_client(keys.test_key) as relay:
        to = fresh_number()
        created = await relay.verifications.create(to, metadata={"n": "1"})
        assert (await relay.verifications.check("999999", to=to))["remaining_checks"] == 4
        approved = await relay.verifications.check("000000", id=created["id"])
        assert approved["status"] == "approved"
        assert (await relay.verifications.retrieve(created["id"]))["verified"] is True
        with pytest.raises(ConflictError) as raised:
            await relay.verifications.cancel(created["id"])
        assert raised.value.code == "verification_approved"
        other = await relay.verifications.create(fresh_number())
        assert (await relay.verifications.cancel(other["id"]))["status"] == "canceled"


async def test_async_for_walks_every_page(live: LiveRelay, keys: NewAccount) -> None:
    async with live.async_client(keys.test_key) as relay:
        made = [(await relay.verifications.create(fresh_number()))["id"] for _ in range(5)]
        listed = [v["id"] async for v in relay.verifications.list(limit=2)]
        assert listed == list(reversed(made))


async def test_messages_and_events(live: LiveRelay, keys: NewAccount) -> None:
    async with live.async_client(keys.test_key) as relay:
        sent = await relay.messages.send(fresh_number(), code="7788")
        assert (await relay.messages.retrieve(sent["id"]))["id"] == sent["id"]
        events = [e async for e in relay.events.list(related=sent["id"], limit=1)]
        assert events
        assert {e["type"] for e in events} <= {"message.sent", "message.delivered"}
        assert (await relay.events.retrieve(events[0]["id"]))["id"] == events[0]["id"]
        with pytest.raises(NotFoundError):
            await relay.messages.retrieve("msg_" + "0" * 26)


def test_the_async_client_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELAY_API_KEY", raising=False)
    with pytest.raises(ValueError, match="API key"):
        AsyncRelay()


def test_the_key_and_address_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, live: LiveRelay, keys: NewAccount
) -> None:
    monkeypatch.setenv("RELAY_API_KEY", keys.test_key)
    monkeypatch.setenv("RELAY_BASE_URL", live.base_url + "/v1/")
    with Relay(verify=str(live.cert)) as relay:
        created = relay.verifications.create(fresh_number())
        assert relay.verifications.retrieve(created["id"])["id"] == created["id"]
