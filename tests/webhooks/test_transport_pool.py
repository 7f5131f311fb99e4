"""Kept-alive connections: reused, bounded per endpoint, closed when idle or at shutdown."""

import asyncio
import contextlib
import gc
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from relay.webhooks.transport import WebhookClient
from tests.webhooks.tls_receiver import (
    DEADLINE,
    GZIPPED,
    LOOPBACK,
    FixedResolver,
    Receiver,
    ServerIdentity,
    running_receiver,
    write_identity,
)


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return write_identity(tmp_path_factory.mktemp("pool-pki"), "Relay Pool Test CA")


@pytest.fixture
async def receiver(identity: ServerIdentity) -> AsyncIterator[Receiver]:
    async with running_receiver(identity) as running:
        yield running


def client_for(identity: ServerIdentity, **options: Any) -> WebhookClient:
    return WebhookClient(
        timeout=DEADLINE,
        allowed_networks=tuple(LOOPBACK),
        ca_bundle=str(identity.ca_path),
        **options,
    )


@contextlib.contextmanager
def loop_reports() -> Iterator[list[str]]:
    """What the event loop's exception handler hears (aiohttp's "Unclosed ..." reports)."""
    loop = asyncio.get_running_loop()
    heard: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: heard.append(str(context["message"])))
    try:
        yield heard
    finally:
        loop.set_exception_handler(previous)


async def test_posts_to_one_endpoint_share_one_connection_and_one_lookup(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")
    client = client_for(identity, resolver=resolver)
    try:
        results = [await client.post(receiver.url("/again", "localhost"), b"{}", {}) for _ in "abc"]
    finally:
        await client.aclose()

    assert [result.ok for result in results] == [True, True, True]
    assert receiver.connections == 1
    assert resolver.lookups == ["localhost"]
    assert receiver.server_names == ["localhost"]


async def test_posts_in_flight_to_one_endpoint_open_no_more_connections_than_its_concurrency(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    client = client_for(identity, concurrency=2)
    try:
        results = await asyncio.gather(
            *(client.post(receiver.url("/again"), b"{}", {}) for _ in range(6))
        )
    finally:
        await client.aclose()

    assert all(result.ok for result in results)
    assert receiver.connections == 2
    assert len(receiver.requests) == 6


async def test_an_endpoint_whose_connections_are_all_busy_does_not_hold_up_another(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    """127.0.0.1 and localhost are two endpoints, though the same receiver."""
    client = client_for(identity, concurrency=1, resolver=FixedResolver("127.0.0.1"))
    hanging = asyncio.create_task(client.post(receiver.url("/hang"), b"{}", {}))
    try:
        await asyncio.wait_for(receiver.arrived.wait(), DEADLINE)
        other = await client.post(receiver.url("/again", "localhost"), b"{}", {})
    finally:
        hanging.cancel()
        await asyncio.gather(hanging, return_exceptions=True)
        await client.aclose()

    assert other.ok
    assert receiver.paths == ["/hang", "/again"]


async def test_a_connection_idle_for_the_idle_time_is_closed_and_the_next_post_opens_another(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    client = client_for(identity, idle_seconds=0.2)
    try:
        first = await client.post(receiver.url("/again"), b"{}", {})
        await asyncio.wait_for(receiver.client_closed.wait(), DEADLINE * 5)
        second = await client.post(receiver.url("/again"), b"{}", {})
    finally:
        await client.aclose()

    assert (first.ok, second.ok) == (True, True)
    assert receiver.connections == 2


async def test_closing_the_client_closes_its_connections_and_leaves_nothing_unclosed(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    with loop_reports() as heard, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = client_for(identity)
        result = await client.post(receiver.url("/again"), b"{}", {})
        await client.aclose()
        await asyncio.wait_for(receiver.client_closed.wait(), DEADLINE)
        del client
        gc.collect()

    assert result.ok
    assert heard == []
    assert [str(warning.message) for warning in caught] == []


async def test_a_client_that_never_posted_closes_cleanly(identity: ServerIdentity) -> None:
    with loop_reports() as heard:
        await client_for(identity).aclose()
        gc.collect()

    assert heard == []


async def test_a_cookie_set_by_a_receiver_is_never_sent_back(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    """By name: a cookie jar would refuse cookies from an IP address anyway."""
    client = client_for(identity, resolver=FixedResolver("127.0.0.1"))
    try:
        await client.post(receiver.url("/cookie", "localhost"), b"{}", {})
        result = await client.post(receiver.url("/again", "localhost"), b"{}", {})
    finally:
        await client.aclose()

    assert result.ok
    assert [request.path for request in receiver.requests] == ["/cookie", "/again"]
    assert "cookie" not in receiver.requests[1].headers


async def test_a_compressed_answer_is_kept_as_received_never_inflated(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    client = client_for(identity)
    try:
        result = await client.post(receiver.url("/gzip"), b"{}", {})
    finally:
        await client.aclose()

    assert result.ok
    assert result.body == GZIPPED
    assert receiver.requests[0].headers["accept-encoding"] == "identity"


async def test_the_request_names_relay_and_adds_no_content_type_of_its_own(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    client = client_for(identity)
    try:
        await client.post(receiver.url("/again"), b"{}", {})
        await client.post(receiver.url("/again"), b"{}", {"Content-Type": "application/json"})
    finally:
        await client.aclose()

    bare, typed = (request.headers for request in receiver.requests)
    assert bare["user-agent"] == "Relay-Webhooks/1"
    assert "content-type" not in bare
    assert typed["content-type"] == "application/json"
    assert bare["content-length"] == "2"


async def test_a_client_keeps_each_urls_verdict_apart(
    receiver: Receiver, identity: ServerIdentity
) -> None:
    """The checks of a URL are remembered per URL: a refused one stays refused beside an
    accepted one, in either order, through one client."""
    client = client_for(identity)
    refused = "http://127.0.0.1/ok"  # not https
    try:
        before = await client.post(refused, b"{}", {})
        accepted = await client.post(receiver.url("/again"), b"{}", {})
        after = await client.post(refused, b"{}", {})
        again = await client.post(receiver.url("/again"), b"{}", {})
    finally:
        await client.aclose()

    assert (before.error, after.error) == ("invalid_url", "invalid_url")
    assert (accepted.ok, again.ok) == (True, True)
    assert receiver.paths == ["/again", "/again"]
