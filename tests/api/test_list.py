"""GET /v1/verifications: the list shape, keyset pagination, filters and their errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.harness import RunningServer

URL = "/v1/verifications"


def number(i: int) -> str:
    """Distinct valid US numbers (only one pending verification per number is allowed)."""
    return f"+1415555{i:04d}"


def create(api: httpx.Client, to: str, **fields: Any) -> dict[str, Any]:
    response = api.post(URL, json={"to": to, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def create_many(api: httpx.Client, count: int, *, first: int = 0) -> list[str]:
    """Ids of `count` new verifications, oldest first."""
    return [create(api, number(first + i))["id"] for i in range(count)]


def listing(api: httpx.Client, **params: Any) -> dict[str, Any]:
    response = api.get(URL, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids(page: dict[str, Any]) -> list[str]:
    return [item["id"] for item in page["data"]]


def refused(
    response: httpx.Response, param: str, codes: tuple[str, ...] = ("parameter_invalid",)
) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] in codes
    assert error["param"] == param


def test_an_empty_list_has_the_list_shape(api: httpx.Client) -> None:
    assert listing(api) == {"object": "list", "url": URL, "data": [], "has_more": False}


def test_the_list_is_newest_first_and_shows_verifications_as_get_does(api: httpx.Client) -> None:
    created = create_many(api, 3)
    page = listing(api)
    assert page["object"] == "list"
    assert page["url"] == URL
    assert page["has_more"] is False
    assert ids(page) == list(reversed(created))
    for item in page["data"]:
        assert item == api.get(f"{URL}/{item['id']}").json()


def test_limit_defaults_to_10(api: httpx.Client) -> None:
    created = create_many(api, 12)
    page = listing(api)
    assert ids(page) == list(reversed(created))[:10]
    assert page["has_more"] is True


def test_limit_accepts_1_to_100(api: httpx.Client) -> None:
    created = create_many(api, 3)
    one = listing(api, limit=1)
    assert ids(one) == [created[-1]]
    assert one["has_more"] is True
    hundred = listing(api, limit=100)
    assert ids(hundred) == list(reversed(created))
    assert hundred["has_more"] is False


@pytest.mark.parametrize("limit", ["0", "101", "-1", "ten"])
def test_a_limit_outside_1_to_100_is_refused(api: httpx.Client, limit: str) -> None:
    refused(api.get(URL, params={"limit": limit}), "limit")


def test_walking_forward_then_back_returns_every_id_once_in_order(api: httpx.Client) -> None:
    newest_first = list(reversed(create_many(api, 25)))

    forward: list[str] = []
    pages_more: list[bool] = []
    page = listing(api, limit=10)
    while True:
        forward += ids(page)
        pages_more.append(page["has_more"])
        if not page["has_more"]:
            break
        page = listing(api, limit=10, starting_after=forward[-1])
    assert forward == newest_first
    assert pages_more == [True, True, False]
    assert [len(chunk) for chunk in (forward[:10], forward[10:20], forward[20:])] == [10, 10, 5]

    oldest = forward[-1]
    backward = [oldest]
    pages_more = []
    page = listing(api, limit=10, ending_before=oldest)
    while True:
        backward = ids(page) + backward
        pages_more.append(page["has_more"])
        if not page["has_more"]:
            break
        page = listing(api, limit=10, ending_before=backward[0])
    assert backward == newest_first
    assert pages_more == [True, True, False]


def test_a_page_before_its_neighbour_is_the_ids_just_newer_than_the_cursor(
    api: httpx.Client,
) -> None:
    newest_first = list(reversed(create_many(api, 6)))
    page = listing(api, limit=2, ending_before=newest_first[4])
    assert ids(page) == newest_first[2:4]
    assert page["has_more"] is True


def test_past_either_end_the_page_is_empty_and_has_no_more(api: httpx.Client) -> None:
    newest_first = list(reversed(create_many(api, 3)))
    after_oldest = listing(api, starting_after=newest_first[-1])
    assert after_oldest["data"] == []
    assert after_oldest["has_more"] is False
    before_newest = listing(api, ending_before=newest_first[0])
    assert before_newest["data"] == []
    assert before_newest["has_more"] is False


def test_inserts_between_page_fetches_do_not_shift_the_remaining_pages(
    api: httpx.Client,
) -> None:
    newest_first = list(reversed(create_many(api, 9)))
    first = listing(api, limit=3)
    assert ids(first) == newest_first[:3]
    create_many(api, 4, first=100)
    second = listing(api, limit=3, starting_after=ids(first)[-1])
    create_many(api, 4, first=200)
    third = listing(api, limit=3, starting_after=ids(second)[-1])
    assert ids(second) == newest_first[3:6]
    assert ids(third) == newest_first[6:9]
    assert third["has_more"] is False


def test_starting_after_and_ending_before_together_are_refused(api: httpx.Client) -> None:
    created = create_many(api, 3)
    response = api.get(URL, params={"starting_after": created[2], "ending_before": created[0]})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parameter_invalid"
    assert response.json()["error"]["param"] in ("starting_after", "ending_before")


@pytest.mark.parametrize("cursor", ["42", "att_01J00000000000000000000000", "ver_short", "ver_"])
@pytest.mark.parametrize("name", ["starting_after", "ending_before"])
def test_a_cursor_that_is_not_a_verification_id_is_refused(
    api: httpx.Client, name: str, cursor: str
) -> None:
    refused(api.get(URL, params={name: cursor}), name)


def test_the_status_filter_selects_each_outcome(api: httpx.Client, server: RunningServer) -> None:
    expiring = create(api, number(1), ttl=60)["id"]
    approved = create(api, number(2))["id"]
    assert api.post(f"{URL}/check", json={"id": approved, "code": "000000"}).status_code == 200
    canceled = create(api, number(3))["id"]
    assert api.post(f"{URL}/{canceled}/cancel").status_code == 200
    pending = create(api, number(4))["id"]
    server.clock.advance(61)

    assert ids(listing(api, status="pending")) == [pending]
    assert ids(listing(api, status="approved")) == [approved]
    assert ids(listing(api, status="canceled")) == [canceled]
    expired = listing(api, status="expired")
    assert ids(expired) == [expiring]
    assert expired["data"][0]["status"] == "expired"
    assert listing(api, status="max_attempts_reached")["data"] == []
    everything = listing(api)
    assert ids(everything) == [pending, canceled, approved, expiring]
    assert [item["status"] for item in everything["data"]] == [
        "pending",
        "canceled",
        "approved",
        "expired",
    ]


def test_an_unknown_status_is_refused(api: httpx.Client) -> None:
    refused(api.get(URL, params={"status": "closed"}), "status")


def test_the_to_filter_selects_one_numbers_verifications(api: httpx.Client) -> None:
    older = create(api, number(1))["id"]
    assert api.post(f"{URL}/{older}/cancel").status_code == 200
    create(api, number(2))
    newer = create(api, number(1))["id"]
    page = listing(api, to=number(1))
    assert ids(page) == [newer, older]
    assert {item["to"] for item in page["data"]} == {number(1)}
    assert listing(api, to=number(3))["data"] == []


def test_a_to_filter_that_is_not_e164_is_refused(api: httpx.Client) -> None:
    # Either code says it: the value is not a usable parameter, and not a phone number.
    codes = ("parameter_invalid", "phone_number_invalid")
    for to in ("4155550001", "+1415", "+1415555abcd"):
        refused(api.get(URL, params={"to": to}), "to", codes)


def test_created_bounds_split_the_list_at_a_moment(
    api: httpx.Client, server: RunningServer
) -> None:
    before = create_many(api, 3)
    server.clock.advance(5)
    after = create_many(api, 3, first=10)
    boundary = api.get(f"{URL}/{after[0]}").json()["created_at"]
    assert boundary.endswith("Z")

    assert ids(listing(api, **{"created[gte]": boundary})) == list(reversed(after))
    assert ids(listing(api, **{"created[lt]": boundary})) == list(reversed(before))
    assert ids(listing(api, **{"created[gte]": boundary, "created[lt]": boundary})) == []
    offset = boundary.replace("Z", "+00:00")
    assert ids(listing(api, **{"created[gte]": offset})) == list(reversed(after))


def test_created_bounds_combine_with_pagination(api: httpx.Client, server: RunningServer) -> None:
    create_many(api, 2)
    server.clock.advance(5)
    after = list(reversed(create_many(api, 5, first=10)))
    boundary = api.get(f"{URL}/{after[-1]}").json()["created_at"]
    first = listing(api, limit=3, **{"created[gte]": boundary})
    assert ids(first) == after[:3]
    assert first["has_more"] is True
    second = listing(api, limit=3, starting_after=after[2], **{"created[gte]": boundary})
    assert ids(second) == after[3:]
    assert second["has_more"] is False


@pytest.mark.parametrize("param", ["created[gte]", "created[lt]"])
@pytest.mark.parametrize("value", ["2024-05-01T12:00:00", "yesterday"])
def test_a_created_bound_without_a_zone_or_not_a_time_is_refused(
    api: httpx.Client, param: str, value: str
) -> None:
    refused(api.get(URL, params={param: value}), param)
