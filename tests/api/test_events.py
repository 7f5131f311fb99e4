"""GET /v1/events and /v1/events/{id}: reconciling with what Relay sent, or failed to send."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from tests.harness import RunningServer, create_account
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    events_of,
    isolated_database,
    number,
    settled,
    webhook_server,
)

URL = "/v1/events"
_numbers = itertools.count(300)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, identity: Identity
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "events_api", tmp_path_factory.mktemp("db"))
    with webhook_server(tmp_path_factory.mktemp("data"), url, identity) as running:
        yield running


def create(api: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/verifications", json={"to": number(next(_numbers)), **fields})
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def listing(api: httpx.Client, **params: Any) -> dict[str, Any]:
    response = api.get(URL, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids(page: dict[str, Any]) -> list[str]:
    return [event["id"] for event in page["data"]]


def refused(response: httpx.Response, param: str) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "parameter_invalid"
    assert response.json()["error"]["param"] == param


def missing(response: httpx.Response) -> None:
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "resource_missing"


# --- one event ---------------------------------------------------------------------


def test_an_event_without_a_webhook_shows_its_envelope_and_delivery_status_none(
    api: httpx.Client,
) -> None:
    created = create(api, metadata={"k": "v"})
    [sent, delivered] = events_of(api, created["id"])

    shown = api.get(f"{URL}/{delivered['id']}")

    assert shown.status_code == 200
    event = shown.json()
    assert event == delivered
    assert set(event) == {
        "id",
        "object",
        "type",
        "created_at",
        "livemode",
        "data",
        "delivery_status",
        "webhook_url",
        "delivery_attempts",
    }
    assert (event["object"], event["type"], event["livemode"]) == (
        "event",
        "verification.delivered",
        False,
    )
    assert event["data"]["object"] == created
    assert (event["delivery_status"], event["webhook_url"], event["delivery_attempts"]) == (
        "none",
        None,
        [],
    )
    assert sent["type"] == "verification.sent"


def test_an_event_with_a_webhook_shows_each_delivery_attempt(
    api: httpx.Client, receiver: Receiver
) -> None:
    created = create(api, webhook_url=receiver.url("/flaky"))

    events = settled(api, created["id"], 2)

    for event in events:
        shown = api.get(f"{URL}/{event['id']}").json()
        assert shown["delivery_status"] == "delivered"
        assert shown["webhook_url"] == receiver.url("/flaky")
        attempts = shown["delivery_attempts"]
        assert [(a["status_code"], a["error"]) for a in attempts] == [
            (500, "http_status"),
            (500, "http_status"),
            (200, None),
        ]
        assert [a["at"] for a in attempts] == sorted(a["at"] for a in attempts)
        assert all(isinstance(a["duration_ms"], int) for a in attempts)


def test_events_of_another_account_or_mode_and_unknown_ids_are_missing(
    api: httpx.Client, live_api: httpx.Client, server: RunningServer
) -> None:
    created = create(api)
    [event, _] = events_of(api, created["id"])
    other = create_account(server.settings, "Other")

    with server.client(other.test_key) as stranger:
        missing(stranger.get(f"{URL}/{event['id']}"))
        assert listing(stranger, related=created["id"])["data"] == []
    missing(live_api.get(f"{URL}/{event['id']}"))
    missing(api.get(f"{URL}/evt_00000000000000000000000000"))
    missing(api.get(f"{URL}/{created['id']}"))
    missing(api.get(f"{URL}/not-an-id"))


def test_events_need_a_valid_key(server: RunningServer, account: NewAccount) -> None:
    with server.client(None) as anonymous:
        assert anonymous.get(URL).status_code == 401
        assert anonymous.get(f"{URL}/evt_00000000000000000000000000").status_code == 401


# --- the list ------------------------------------------------------------------------


def test_the_list_has_the_list_shape_newest_first(api: httpx.Client) -> None:
    assert listing(api) == {"object": "list", "url": URL, "data": [], "has_more": False}
    first, second = create(api), create(api)

    page = listing(api)

    assert page["object"] == "list"
    assert page["url"] == URL
    assert page["has_more"] is False
    related = [event["data"]["object"]["id"] for event in page["data"]]
    assert related == [second["id"], second["id"], first["id"], first["id"]]
    assert ids(page) == sorted(ids(page), reverse=True)


def test_the_list_filters_by_related_object_type_and_delivery_status(
    api: httpx.Client, receiver: Receiver
) -> None:
    plain = create(api)
    hooked = create(api, webhook_url=receiver.url("/ok"))
    approved = api.post("/v1/verifications/check", json={"id": plain["id"], "code": "000000"})
    assert approved.status_code == 200
    settled(api, hooked["id"], 2)

    assert len(listing(api, related=plain["id"])["data"]) == 3
    [event] = listing(api, type="verification.approved")["data"]
    assert event["data"]["object"]["id"] == plain["id"]
    delivered = listing(api, delivery_status="delivered")["data"]
    assert {e["data"]["object"]["id"] for e in delivered} == {hooked["id"]}
    assert len(listing(api, delivery_status="none")["data"]) == 3
    assert listing(api, related=hooked["id"], type="verification.approved")["data"] == []


def test_the_list_pages_forwards_and_backwards_by_event_id(api: httpx.Client) -> None:
    for _ in range(3):
        create(api)
    everything = ids(listing(api, limit=100))
    assert len(everything) == 6

    first = listing(api, limit=4)
    second = listing(api, limit=4, starting_after=ids(first)[-1])
    back = listing(api, limit=4, ending_before=ids(second)[0])

    assert (ids(first), first["has_more"]) == (everything[:4], True)
    assert (ids(second), second["has_more"]) == (everything[4:], False)
    assert (ids(back), back["has_more"]) == (everything[:4], False)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"related": "acct_123"}, "related"),
        ({"related": "ver_short"}, "related"),
        ({"starting_after": "ver_01JD3Q9Y6KZ3N8M2W4T6V0X5CA"}, "starting_after"),
        (
            {
                "starting_after": "evt_01JD3Q9Y6KZ3N8M2W4T6V0X5CA",
                "ending_before": "evt_01JD3Q9Y6KZ3N8M2W4T6V0X5CB",
            },
            "ending_before",
        ),
        ({"type": "verification.unknown"}, "type"),
        ({"delivery_status": "lost"}, "delivery_status"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
    ],
)
def test_a_bad_list_parameter_is_refused_by_name(
    api: httpx.Client, params: dict[str, Any], param: str
) -> None:
    refused(api.get(URL, params=params), param)
