"""The client address: the TCP peer, unless a trusted proxy forwarded the request."""

from __future__ import annotations

import ipaddress

from relay.web.peers import client_address, is_trusted_peer, limit_key

PROXIES = [ipaddress.ip_network("192.0.2.0/24")]


def scope(peer: str, *forwarded: str) -> dict[str, object]:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return {"client": (peer, 443), "headers": headers}


def address(text: str) -> object:
    return ipaddress.ip_address(text)


def test_a_direct_client_is_its_peer_whatever_it_forwards() -> None:
    assert client_address(scope("203.0.113.9", "10.0.0.1"), PROXIES) == address("203.0.113.9")


def test_through_a_trusted_proxy_the_client_is_the_hop_it_appended() -> None:
    found = client_address(scope("192.0.2.1", "10.9.9.9, 203.0.113.9"), PROXIES)
    assert found == address("203.0.113.9")


def test_trusted_proxies_in_a_chain_are_skipped_from_the_right() -> None:
    found = client_address(scope("192.0.2.1", "203.0.113.9, 192.0.2.7"), PROXIES)
    assert found == address("203.0.113.9")


def test_several_forwarded_headers_read_as_one_list() -> None:
    found = client_address(scope("192.0.2.1", "10.0.0.1", "203.0.113.9"), PROXIES)
    assert found == address("203.0.113.9")


def test_an_unreadable_hop_leaves_the_proxy_as_the_client() -> None:
    assert client_address(scope("192.0.2.1", "junk"), PROXIES) == address("192.0.2.1")


def test_a_trusted_proxy_without_a_forwarded_header_is_the_client() -> None:
    assert client_address(scope("192.0.2.1"), PROXIES) == address("192.0.2.1")


def test_an_ipv4_mapped_peer_is_trusted_as_its_ipv4_address() -> None:
    assert is_trusted_peer(scope("::ffff:192.0.2.1"), PROXIES)


def test_no_peer_is_no_address() -> None:
    assert client_address({"client": None, "headers": []}, PROXIES) is None


def test_an_address_read_again_is_the_same_and_counted_under_the_same_key() -> None:
    first = client_address(scope("2001:db8::7"), PROXIES)
    again = client_address(scope("2001:db8::7"), PROXIES)
    assert first == again == address("2001:db8::7")
    hits = limit_key.cache_info().hits
    assert limit_key(first) == limit_key(again) == "2001:db8::/64"
    assert limit_key.cache_info().hits > hits
