"""The Verify API through `relay_client.Relay`, against a live `relay serve`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from relay.accounts.models import NewAccount
from relay_client import InvalidRequestError, Relay
from tests.client.conftest import fresh_number


def test_create_returns_a_pending_verification_with_its_first_attempt(relay: Relay) -> None:
    to = fresh_number()
    verification = relay.verifications.create(
        to, metadata={"user": "42"}, code_length=8, ttl=120, locale="fr"
    )
    assert verification["id"].startswith("ver_")
    assert verification["object"] == "verification"
    assert verification["status"] == "pending"
    assert verification["to"] == to
    assert verification["livemode"] is False
    assert verification["code_length"] == 8
    assert verification["locale"] == "fr"
    assert verification["metadata"] == {"user": "42"}
    assert verification["remaining_checks"] == 5
    assert len(verification["attempts"]) == 1


def test_a_verification_shows_its_channel_and_each_attempt_its_own(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    assert created["channel"] == "sms"
    assert [a["channel"] for a in created["attempts"]] == ["sms"]
    assert created["country"] == "US"


def test_whatsapp_that_fails_falls_back_to_sms_with_the_same_verification(relay: Relay) -> None:
    # The sandbox's WhatsApp route is down for +15005550001: the next channel delivers.
    created = relay.verifications.create("+15005550001", channels=["whatsapp", "sms"])
    assert [(a["channel"], a["status"]) for a in created["attempts"]] == [
        ("whatsapp", "failed"),
        ("sms", "delivered"),
    ]
    assert created["channel"] == "sms"
    assert relay.verifications.check("000000", id=created["id"])["verified"] is True


def test_an_email_verification_has_no_country_and_is_checked_by_address(relay: Relay) -> None:
    to = f"client-{fresh_number()[1:]}@example.com"
    created = relay.verifications.create(to, channel="email")
    assert (created["channel"], created["country"], created["to"]) == ("email", None, to)
    assert relay.verifications.check("000000", to=to)["id"] == created["id"]


def test_a_channel_mismatch_is_an_invalid_request_naming_to(relay: Relay) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        relay.verifications.create(fresh_number(), channel="email")
    assert (raised.value.code, raised.value.param) == ("parameter_invalid", "to")


def test_check_with_the_test_code_approves_the_verification(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    checked = relay.verifications.check("000000", id=created["id"])
    assert checked["id"] == created["id"]
    assert checked["status"] == "approved"
    assert checked["verified"] is True
    assert checked["approved_at"] is not None


def test_check_by_number_finds_that_numbers_pending_verification(relay: Relay) -> None:
    to = fresh_number()
    created = relay.verifications.create(to)
    checked = relay.verifications.check("000000", to=to)
    assert checked["id"] == created["id"]
    assert checked["verified"] is True


def test_a_wrong_code_leaves_it_pending_with_one_check_fewer(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    checked = relay.verifications.check("123", id=created["id"])
    assert checked["status"] == "pending"
    assert checked["verified"] is False
    assert checked["remaining_checks"] == 4


def test_check_needs_exactly_one_of_id_and_to(relay: Relay) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        relay.verifications.check("000000")
    with pytest.raises(ValueError, match="exactly one"):
        relay.verifications.check("000000", id="ver_x", to="+14155550100")


def test_retrieve_returns_the_verification_as_it_is_now(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    relay.verifications.check("000000", id=created["id"])
    retrieved = relay.verifications.retrieve(created["id"])
    assert retrieved["id"] == created["id"]
    assert retrieved["status"] == "approved"


def test_cancel_closes_it_and_a_second_cancel_changes_nothing(relay: Relay) -> None:
    created = relay.verifications.create(fresh_number())
    canceled = relay.verifications.cancel(created["id"])
    assert canceled["status"] == "canceled"
    assert canceled["canceled_at"] is not None
    assert relay.verifications.cancel(created["id"]) == canceled


def test_list_walks_every_page_newest_first(relay: Relay) -> None:
    made = [relay.verifications.create(fresh_number())["id"] for _ in range(5)]
    listed = [v["id"] for v in relay.verifications.list(limit=2)]
    assert listed == list(reversed(made))


def test_list_passes_its_filters_to_every_page(relay: Relay) -> None:
    made = [relay.verifications.create(fresh_number())["id"] for _ in range(4)]
    relay.verifications.cancel(made[1])
    relay.verifications.cancel(made[3])
    canceled = [v["id"] for v in relay.verifications.list(status="canceled", limit=1)]
    assert canceled == [made[3], made[1]]
    one = relay.verifications.list(to=relay.verifications.retrieve(made[0])["to"])
    assert [v["id"] for v in one] == [made[0]]


def test_list_filters_by_creation_time_with_aware_datetimes(relay: Relay) -> None:
    before = datetime.now(UTC) - timedelta(minutes=1)
    made = relay.verifications.create(fresh_number())["id"]
    assert [v["id"] for v in relay.verifications.list(created_gte=before)] == [made]
    assert list(relay.verifications.list(created_lt=before)) == []
    with pytest.raises(ValueError, match="timezone"):
        relay.verifications.list(created_gte=datetime.now())


def test_list_from_a_cursor_pages_from_there(relay: Relay) -> None:
    made = [relay.verifications.create(fresh_number())["id"] for _ in range(5)]
    older = [v["id"] for v in relay.verifications.list(starting_after=made[3], limit=2)]
    assert older == [made[2], made[1], made[0]]
    newer = [v["id"] for v in relay.verifications.list(ending_before=made[1], limit=2)]
    # Toward newer items page by page, each page newest first.
    assert newer == [made[3], made[2], made[4]]


def test_a_list_is_lazy_and_can_be_walked_twice(relay: Relay, keys: NewAccount) -> None:
    listing = relay.verifications.list()
    assert list(listing) == []
    made = relay.verifications.create(fresh_number())["id"]
    assert [v["id"] for v in listing] == [made]
