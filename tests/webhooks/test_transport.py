"""The outbound POST against a real HTTPS receiver on loopback (`tls_receiver`)."""

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Sequence

import pytest

from relay.webhooks import verify
from relay.webhooks.guard import IPAddress
from relay.webhooks.signature import sign
from relay.webhooks.transport import MAX_RESPONSE_BYTES, WebhookClient, post
from tests.webhooks.tls_receiver import (
    DEADLINE,
    LOOPBACK,
    FixedResolver,
    Receiver,
    ServerIdentity,
    closed_port,
    deliver,
    running_receiver,
    write_identity,
)

SECRET = "whsec_transport_test"


@pytest.fixture(scope="session")
def trusted_identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return write_identity(tmp_path_factory.mktemp("trusted-pki"), "Relay Test CA")


@pytest.fixture(scope="session")
def rogue_identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return write_identity(tmp_path_factory.mktemp("rogue-pki"), "Someone Else's CA")


@pytest.fixture
async def receiver(trusted_identity: ServerIdentity) -> AsyncIterator[Receiver]:
    async with running_receiver(trusted_identity) as running:
        yield running


@pytest.fixture
async def untrusted_receiver(rogue_identity: ServerIdentity) -> AsyncIterator[Receiver]:
    async with running_receiver(rogue_identity) as running:
        yield running


# --- outcomes ---------------------------------------------------------------


async def test_a_200_answer_is_a_success(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/ok"), trusted_identity)

    assert result.ok
    assert (result.status_code, result.error) == (200, None)
    assert result.body == b'{"received":true}'
    assert 0 <= result.duration_ms < DEADLINE * 1000


async def test_a_204_answer_is_a_success(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/no-content"), trusted_identity)

    assert result.ok
    assert result.status_code == 204


async def test_a_500_answer_is_a_failure_that_keeps_the_status(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/error"), trusted_identity)

    assert not result.ok
    assert (result.status_code, result.error) == (500, "http_status")
    assert result.body == b"boom"


async def test_redirect_is_a_failure_and_is_not_followed(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/redirect"), trusted_identity)

    assert not result.ok
    assert (result.status_code, result.error) == (302, "redirect")
    assert receiver.paths == ["/redirect"]


async def test_a_receiver_that_never_answers_times_out_at_the_deadline(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    started = time.monotonic()

    result = await deliver(receiver.url("/hang"), trusted_identity, deadline=0.5)

    elapsed = time.monotonic() - started
    assert (result.ok, result.status_code, result.error) == (False, None, "timeout")
    assert 0.5 <= elapsed < 2.5  # the upper bound is loose for loaded CI machines
    assert receiver.paths == ["/hang"]


async def test_a_body_that_stalls_after_the_headers_times_out_at_the_deadline(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    """The deadline covers the whole attempt, not each read separately."""
    started = time.monotonic()

    result = await deliver(receiver.url("/stall-body"), trusted_identity, deadline=0.5)

    assert (result.ok, result.error) == (False, "timeout")
    assert time.monotonic() - started < 2.5


async def test_a_huge_response_body_is_cut_at_64_kib_and_does_not_hang(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/huge"), trusted_identity)

    assert result.ok
    assert len(result.body) == MAX_RESPONSE_BYTES == 64 * 1024
    assert result.duration_ms < 1000
    await asyncio.sleep(0.05)  # let the receiver notice the closed connection
    assert receiver.huge_bytes_sent < 8 * 1024 * 1024


async def test_a_receiver_that_closes_without_answering_is_a_failure_not_an_exception(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/close"), trusted_identity)

    assert (result.ok, result.status_code, result.error) == (False, None, "protocol_error")


async def test_a_closed_port_is_a_connect_error(trusted_identity: ServerIdentity) -> None:
    result = await deliver(f"https://127.0.0.1:{closed_port()}/ok", trusted_identity)

    assert (result.ok, result.error) == (False, "connect_error")


async def test_a_name_that_does_not_resolve_is_a_dns_error(
    trusted_identity: ServerIdentity,
) -> None:
    async def failing(host: str, port: int) -> Sequence[IPAddress]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    result = await post(
        "https://hooks.example.com/relay",
        b"{}",
        {},
        timeout=DEADLINE,
        allowed_networks=LOOPBACK,
        ca_bundle=str(trusted_identity.ca_path),
        resolver=failing,
    )

    assert (result.ok, result.error) == (False, "dns_error")


# --- what the receiver gets -------------------------------------------------


async def test_the_receiver_gets_exactly_the_bytes_sent_and_a_valid_signature(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    body = '{"id":"evt_1","data":{"note":"caf\u00e9 \u2713"}}\n  '.encode()
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "Relay-Signature": sign(body, [SECRET], timestamp=timestamp),
    }

    result = await deliver(receiver.url("/ok"), trusted_identity, body=body, headers=headers)

    assert result.ok
    [received] = receiver.requests
    assert (received.method, received.body) == ("POST", body)
    assert received.headers["relay-signature"] == headers["Relay-Signature"]
    assert received.headers["content-type"] == "application/json"
    verify(received.body, received.headers["relay-signature"], SECRET)


async def test_tls_uses_the_url_host_while_connecting_to_the_checked_address(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(
        receiver.url("/ok", host="localhost"), trusted_identity, resolver=resolver
    )

    assert result.ok
    assert resolver.lookups == ["localhost"]
    assert receiver.server_names == ["localhost"]
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"


# --- TLS --------------------------------------------------------------------


async def test_a_certificate_from_an_unknown_ca_is_a_tls_error(
    untrusted_receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(untrusted_receiver.url("/ok"), trusted_identity)

    assert (result.ok, result.status_code, result.error) == (False, None, "tls_error")
    assert untrusted_receiver.connections == 1
    assert untrusted_receiver.requests == []


async def test_without_the_extra_ca_bundle_the_test_ca_is_not_trusted(
    receiver: Receiver,
) -> None:
    result = await post(
        receiver.url("/ok"),
        b"{}",
        {},
        timeout=DEADLINE,
        allowed_networks=LOOPBACK,
        ca_bundle=None,
    )

    assert result.error == "tls_error"
    assert receiver.requests == []


async def test_a_certificate_for_another_name_is_a_tls_error(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    """The certificate names localhost; reaching it as another name must fail."""
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(
        receiver.url("/ok", host="hooks.example.com"), trusted_identity, resolver=resolver
    )

    assert result.error == "tls_error"
    assert receiver.server_names == ["hooks.example.com"]
    assert receiver.requests == []


# --- the destination guard --------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
async def test_loopback_is_refused_without_allowed_networks_and_nothing_connects(
    receiver: Receiver, trusted_identity: ServerIdentity, host: str
) -> None:
    result = await deliver(receiver.url("/ok", host=host), trusted_identity, allowed=())

    assert (result.ok, result.status_code, result.error) == (False, None, "refused_address")
    await asyncio.sleep(0.05)  # a connection, had one been made, would be accepted by now
    assert receiver.connections == 0


async def test_a_public_looking_name_resolving_to_a_private_address_is_refused(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("10.0.0.7")

    result = await deliver("https://hooks.example.com/relay", trusted_identity, resolver=resolver)

    assert (result.ok, result.error) == (False, "refused_address")
    assert resolver.lookups == ["hooks.example.com"]


async def test_a_public_looking_name_resolving_to_loopback_never_connects(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(
        receiver.url("/ok", host="hooks.example.com"),
        trusted_identity,
        allowed=(),
        resolver=resolver,
    )

    assert result.error == "refused_address"
    await asyncio.sleep(0.05)
    assert receiver.connections == 0


@pytest.mark.parametrize("dot", ["\uff0e", "\u3002"])
async def test_a_host_that_is_an_ip_literal_once_idna_maps_its_dots_is_checked_as_one(
    receiver: Receiver, trusted_identity: ServerIdentity, dot: str
) -> None:
    """Fullwidth and ideographic dots become "." in the URL parser that aiohttp uses,
    which then connects to the literal without asking any resolver."""
    resolver = FixedResolver("93.184.216.34")
    host = dot.join(["127", "0", "0", "1"])

    result = await deliver(
        receiver.url("/ok", host=host), trusted_identity, allowed=(), resolver=resolver
    )

    assert (result.ok, result.error) == (False, "refused_address")
    assert resolver.lookups == []
    await asyncio.sleep(0.05)
    assert receiver.connections == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/ok",
        "https://user:secret@localhost/ok",
        "https://localhost/" + "a" * 2048,
        "https:///ok",
        # Stored before the create check refused such hosts: the system's IDNA
        # codec raised on it at connect time.
        "https://" + "a" * 64 + ".example/ok",
        "https://hooks..example/ok",
    ],
)
async def test_an_unusable_url_fails_without_any_lookup(
    url: str, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(url, trusted_identity, resolver=resolver)

    assert (result.ok, result.error) == (False, "invalid_url")
    assert resolver.lookups == []


async def test_a_pooled_connection_the_receiver_dropped_is_replaced_not_reused(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    client = WebhookClient(
        timeout=DEADLINE, allowed_networks=tuple(LOOPBACK), ca_bundle=str(trusted_identity.ca_path)
    )
    try:
        first = await client.post(receiver.url("/keep-alive"), b"{}", {})
        receiver.drop_idle.set()
        await asyncio.wait_for(receiver.dropped.wait(), DEADLINE)
        await asyncio.sleep(0.01)  # the end of the stream reaches the client's socket
        second = await client.post(receiver.url("/keep-alive"), b"{}", {})
    finally:
        await client.aclose()
    assert (first.ok, second.ok) == (True, True), (first, second)
    assert receiver.connections == 2
