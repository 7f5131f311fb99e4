"""Who is calling, for middleware that runs before the routes: authenticated once per request."""

from __future__ import annotations

import ipaddress
import re

from starlette.types import Scope

from relay.accounts.models import Caller
from relay.config import Settings
from relay.errors import AuthenticationFailed
from relay.log import bind
from relay.services import Services
from relay.web.peers import client_address, is_trusted_peer

_SCOPE_KEY = "relay.caller"


def bearer_token(scope: Scope) -> str | None:
    header = dict(scope["headers"]).get(b"authorization")
    if header is None:
        return None
    scheme, _, token = header.decode("latin-1").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def scope_caller(scope: Scope, services: Services) -> Caller | None:
    """The caller, or None when the key is missing, wrong, or refused from this address:
    the route then answers 401 itself, so middleware never shapes authentication errors.
    Kept in the scope for this request only; the key's record is kept by the process
    until it changes (`accounts.key_cache`), so a revoked key is refused from the next
    request on."""
    if _SCOPE_KEY in scope:
        # Its fields were bound to the request's log lines when it was found.
        kept: Caller | None = scope[_SCOPE_KEY]
        return kept
    client = client_address(scope, services.settings.trusted_proxies)
    try:
        found: Caller | None = await services.accounts.authenticate(bearer_token(scope), client)
    except AuthenticationFailed:
        found = None
    scope[_SCOPE_KEY] = found
    if found is not None:
        bind(account_id=found.account_id, livemode=found.livemode)
    return found


def base_url(scope: Scope, settings: Settings) -> str:
    """The scheme and host of every absolute URL in an answer (an error's `doc_url`, the
    console's own origin): `public_url` when set. Otherwise the request's `Host`, but only
    when a trusted proxy passed it on or when it names the address Relay listens on;
    anything else is the listening address itself. A `Host` written by the client must
    never put another site's address into what Relay answers (links in errors, pages)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    listening = _listening(scope, settings)
    host = _host_header(scope)
    if host is not None and (
        is_trusted_peer(scope, settings.trusted_proxies) or _names(host, scope, listening)
    ):
        return f"https://{host}"
    return f"https://{_authority(*listening)}"


# A Host header is an authority: a name, an IPv4 address or a bracketed IPv6 one, a port.
_HOST = re.compile(r"(?P<name>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?")
_UNSPECIFIED = frozenset({"", "0.0.0.0", "::"})  # noqa: S104  # compared, never bound


def _host_header(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"host":
            text = value.decode("latin-1")
            return text if _HOST.fullmatch(text) else None
    return None


def _listening(scope: Scope, settings: Settings) -> tuple[str, int]:
    """The address this connection reached: the configured host (or, when it listens on
    every address, the one the connection arrived at) and the port it listens on."""
    server = scope.get("server")
    if not server:
        port = settings.port
    elif server[1] is None:
        # An ASGI server that does not say its port: the scheme's own.
        port = _default_port(scope)
    else:
        port = int(server[1])
    host = settings.host
    if host in _UNSPECIFIED:
        host = str(server[0]) if server else "localhost"
    return host, port


def _names(host: str, scope: Scope, listening: tuple[str, int]) -> bool:
    """Whether `host` names Relay's own listening address at its port: the configured
    host, the address the connection arrived at, or loopback."""
    found = _HOST.fullmatch(host)
    if found is None:
        return False
    name = found["name"].strip("[]").lower()
    port = int(found["port"]) if found["port"] else _default_port(scope)
    if port != listening[1]:
        return False
    server = scope.get("server")
    own = {listening[0].strip("[]").lower()}
    if server:
        own.add(str(server[0]).strip("[]").lower())
    return name in own or _is_loopback(name)


def _default_port(scope: Scope) -> int:
    return 80 if scope.get("scheme") == "http" else 443


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _authority(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return shown if port == 443 else f"{shown}:{port}"
