"""Which base URL an answer's absolute links get, from the request's scope and the settings."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from relay.config import Settings
from relay.web.callers import base_url


def scope(host: str | None, *, peer: str = "203.0.113.7", server: str = "127.0.0.1") -> Any:
    headers = [] if host is None else [(b"host", host.encode("latin-1"))]
    return {"headers": headers, "client": (peer, 50000), "server": (server, 8443)}


def settings(**values: Any) -> Settings:
    return Settings(**{"host": "127.0.0.1", "port": 8443, "public_url": None, **values})


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8443", "127.0.0.1:9999", "localhost", "a/b@evil", None],
)
def test_a_host_not_naming_relays_address_gives_the_listening_address(host: str | None) -> None:
    assert base_url(scope(host), settings()) == "https://127.0.0.1:8443"


@pytest.mark.parametrize(
    "host", ["localhost:8443", "127.0.0.1:8443", "[::1]:8443", "LOCALHOST:8443"]
)
def test_a_host_naming_loopback_at_the_listening_port_is_kept(host: str) -> None:
    assert base_url(scope(host), settings()) == f"https://{host}"


def test_the_configured_host_at_the_listening_port_is_kept() -> None:
    configured = settings(host="relay.internal")
    assert base_url(scope("relay.internal:8443"), configured) == "https://relay.internal:8443"
    assert base_url(scope("evil.example:8443"), configured) == "https://relay.internal:8443"


def test_listening_on_every_address_falls_back_to_the_one_the_connection_reached() -> None:
    everywhere = settings(host="::")
    answer = base_url(scope("evil.example", server="2001:db8::5"), everywhere)
    assert answer == "https://[2001:db8::5]:8443"
    kept = base_url(scope("[2001:db8::5]:8443", server="2001:db8::5"), everywhere)
    assert kept == "https://[2001:db8::5]:8443"


def test_public_url_wins_over_every_host() -> None:
    public = settings(public_url="https://relay.example.com/")
    for host in ("evil.example", "localhost:8443", None):
        assert base_url(scope(host), public) == "https://relay.example.com"


def test_only_a_trusted_proxy_passes_any_host_on() -> None:
    proxied = settings(trusted_proxies=[ipaddress.ip_network("10.0.0.0/8")])
    assert base_url(scope("relay.example.net", peer="10.1.2.3"), proxied) == (
        "https://relay.example.net"
    )
    assert base_url(scope("relay.example.net"), proxied) == "https://127.0.0.1:8443"
    # Even from a trusted proxy, a Host that is no host name is not copied into a link.
    assert base_url(scope("evil.example/path", peer="10.1.2.3"), proxied) == (
        "https://127.0.0.1:8443"
    )
