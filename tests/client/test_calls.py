"""What the client puts on the wire, checked without a server: pure functions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from relay_client import Relay, calls
from relay_client.retries import RetryPolicy
from tests.client.loopback import Answer, scripted


def test_an_id_stays_one_path_segment_whatever_it_holds() -> None:
    call = calls.retrieve_verification("../messages/x?y=1")
    assert call.path == "/v1/verifications/..%2Fmessages%2Fx%3Fy%3D1"


def test_unset_fields_are_left_out_of_the_body() -> None:
    call = calls.create_verification(
        "+14155550100",
        webhook_url=None,
        metadata=None,
        code_length=None,
        ttl=300,
        locale=None,
        idempotency_key=None,
    )
    assert call.body == {"to": "+14155550100", "ttl": 300}


def test_channels_go_on_the_wire_as_a_list_in_their_order() -> None:
    call = calls.create_verification(
        "+14155550100",
        channels=("whatsapp", "sms"),
        webhook_url=None,
        metadata=None,
        code_length=None,
        ttl=None,
        locale=None,
        idempotency_key=None,
    )
    assert call.body == {"to": "+14155550100", "channels": ["whatsapp", "sms"]}


def test_one_channel_goes_on_the_wire_as_channel() -> None:
    call = calls.create_verification(
        "ada@example.com",
        channel="email",
        webhook_url=None,
        metadata=None,
        code_length=None,
        ttl=None,
        locale=None,
        idempotency_key=None,
    )
    assert call.body == {"to": "ada@example.com", "channel": "email"}


def test_created_bounds_use_the_apis_bracket_names() -> None:
    moment = datetime(2024, 5, 1, 12, tzinfo=UTC)
    call = calls.list_verifications(
        limit=None,
        status=None,
        to=None,
        created_gte=moment,
        created_lt="2024-06-01T00:00:00Z",
        starting_after=None,
        ending_before=None,
    )
    assert call.params == {
        "created[gte]": "2024-05-01T12:00:00+00:00",
        "created[lt]": "2024-06-01T00:00:00Z",
    }


def test_the_next_page_continues_after_the_last_item_seen() -> None:
    first = calls.list_events(
        related="ver_1",
        type=None,
        delivery_status=None,
        limit=2,
        starting_after=None,
        ending_before=None,
    )
    page = {"data": [{"id": "evt_9"}, {"id": "evt_8"}], "has_more": True}
    following = calls.next_page(first, page)
    assert following is not None
    assert following.params == {"related": "ver_1", "limit": "2", "starting_after": "evt_8"}
    assert calls.next_page(first, {**page, "has_more": False}) is None


def test_backoff_doubles_up_to_its_cap_and_never_drops_below_half() -> None:
    lowest = RetryPolicy(jitter=lambda: 0.0)
    highest = RetryPolicy(jitter=lambda: 1.0)
    assert [lowest.backoff(n) for n in range(6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    assert [highest.backoff(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_plain_http_is_refused_except_on_loopback() -> None:
    with pytest.raises(ValueError, match="HTTPS only"):
        Relay("sk_test_x", base_url="http://relay.example.com")
    with pytest.raises(ValueError, match="https://"):
        Relay("sk_test_x", base_url="relay.example.com")
    Relay("sk_test_x", base_url="http://127.0.0.1:9").close()


def test_a_base_url_may_end_in_v1_as_the_spec_writes_it() -> None:
    with (
        scripted(Answer(200, b'{"id": "ver_1"}')) as script,
        Relay("sk_test_x", base_url=script.base_url + "/v1/") as client,
    ):
        client.verifications.retrieve("ver_1")
    assert [seen.path for seen in script.seen] == ["/v1/verifications/ver_1"]


def test_the_api_key_stays_out_of_reprs() -> None:
    with Relay("sk_test_secret-value", base_url="http://127.0.0.1:9") as client:
        outgoing = client._core.prepare(calls.retrieve_verification("ver_1"))
    assert outgoing.headers["Authorization"] == "Bearer sk_test_secret-value"
    assert "secret-value" not in repr(client._core) + repr(outgoing)
