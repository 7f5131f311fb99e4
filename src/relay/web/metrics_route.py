"""`GET /metrics`: Prometheus text, for monitoring, never for API keys.

Readable without a credential from loopback and from `metrics_networks`, when
the connection comes straight from there: a request a proxy forwarded names
the proxy as its peer, so it needs the admin token (`metrics_token`, as a
bearer token) wherever it came from. Any other credential is refused, an API
key included, so a leaked key never reads traffic figures.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping, Sequence

from starlette.responses import Response

from relay.config import IpNetwork
from relay.errors import AuthenticationFailed
from relay.metrics import exposition, outbox
from relay.web.callers import bearer_token
from relay.web.operations import Call, Operation

_FORWARDED = (b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-real-ip")
REFUSED = (
    "Metrics need the admin token (metrics_token) as a bearer token, or a direct "
    "connection from loopback or metrics_networks; API keys cannot read them."
)


def may_read_metrics(
    client: str | None,
    headers: Mapping[bytes, bytes],
    *,
    networks: Sequence[IpNetwork],
    token: str | None,
) -> bool:
    """The access rule, pure: the peer's address, the request's headers, the settings."""
    if b"authorization" in headers:
        given = bearer_token({"headers": list(headers.items())})
        return bool(token and given and hmac.compare_digest(given.encode(), token.encode()))
    if client is None or any(name in headers for name in _FORWARDED):
        return False
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    return address.is_loopback or any(address in network for network in networks)


async def metrics(call: Call) -> Response:
    settings = call.services.settings
    client = call.scope.get("client")
    allowed = may_read_metrics(
        client[0] if client else None,
        dict(call.scope["headers"]),
        networks=settings.metrics_networks,
        token=settings.metrics_token,
    )
    if not allowed:
        raise AuthenticationFailed(REFUSED)
    now = call.services.clock.now()
    backlogs = await call.services.db.read(lambda tx: outbox.backlogs(tx, now=now))
    snapshot = await call.services.delivery.measured.figures.current()
    delivered = [
        exposition.Delivered(carrier, country, figures.final, figures.delivered)
        for (carrier, country), figures in sorted(snapshot.figures.items())
    ]
    return Response(exposition.render(backlogs, delivered), media_type=exposition.CONTENT_TYPE)


OPERATION = Operation("GET", "/metrics", metrics, "metrics", authenticated=False, in_schema=False)
