"""One outbound webhook POST: guarded destination, verified TLS, one deadline.

The destination is checked where each connection opens, by the resolver in
`relay.webhooks.resolver`; this module is the attempt around it: the URL
rules, the deadline, the response cap and how a failure is named.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import aiohttp
import certifi
from yarl import URL

from relay.webhooks.guard import (
    GuardError,
    InvalidHostNameError,
    IPNetwork,
    RefusedDestinationError,
    Resolver,
    UnresolvableHostError,
    system_resolver,
    url_problem,
)
from relay.webhooks.resolver import GuardedResolver

__all__ = ["DeliveryResult", "WebhookClient", "post"]

MAX_RESPONSE_BYTES = 64 * 1024
USER_AGENT = "Relay-Webhooks/1"
# As long as an idle keep-alive connection is kept open.
IDLE_POOL_SECONDS = 30.0
# URLs whose checks are kept; past this many the memory starts over.
KNOWN_TARGETS = 4096

DeliveryError = Literal[
    "invalid_url",
    "refused_address",
    "dns_error",
    "connect_error",
    "tls_error",
    "timeout",
    "protocol_error",
    "network_error",
    "redirect",
    "http_status",
]


@dataclass(frozen=True)
class DeliveryResult:
    """How one delivery attempt ended. `ok` is True exactly when `error` is None."""

    status_code: int | None
    error: DeliveryError | None
    duration_ms: int
    ok: bool
    # The first MAX_RESPONSE_BYTES of the response body, for the attempt log.
    body: bytes = b""

    @property
    def excerpt(self) -> str | None:
        """The start of the receiver's answer as printable text, for the console."""
        return excerpt(self.body)


EXCERPT_CHARACTERS = 200


def excerpt(body: bytes) -> str | None:
    """At most EXCERPT_CHARACTERS of `body`, decoded leniently, control characters (a
    receiver's answer is anybody's text) turned into spaces; None when nothing is left."""
    text = body[: EXCERPT_CHARACTERS * 4].decode("utf-8", errors="replace")
    printable = "".join(c if c.isprintable() else " " for c in text)
    shown = " ".join(printable.split())[:EXCERPT_CHARACTERS]
    return shown or None


class WebhookClient:
    """Keep-alive connections for many deliveries: one TLS handshake per receiver, not per event.

    At most `concurrency` connections per endpoint (scheme, host and port), so
    one receiver's connections never crowd out another's; the total is bounded
    where deliveries are claimed (`relay.events.delivery`). A connection idle
    for `idle_seconds` is closed.

    The private-address guard runs when a connection is opened (the address it
    connects to is the one checked), so reusing that connection is as safe as
    opening it was.
    """

    def __init__(
        self,
        *,
        timeout: float,
        allowed_networks: Sequence[IPNetwork],
        ca_bundle: str | None,
        resolver: Resolver = system_resolver,
        concurrency: int = 16,
        idle_seconds: float = IDLE_POOL_SECONDS,
    ) -> None:
        self._timeout = timeout
        self._allowed = tuple(allowed_networks)
        self._ssl_context = _ssl_context(ca_bundle)
        self._resolver = resolver
        self._concurrency = concurrency
        self._idle_seconds = idle_seconds
        # Opened on the first post: a session belongs to the running event loop.
        self._session: aiohttp.ClientSession | None = None
        # A URL's checks depend on nothing else (names are resolved per connection,
        # in the resolver), and most deliveries go to a URL delivered to before.
        self._targets: dict[str, URL | DeliveryError] = {}

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> DeliveryResult:
        """POST `body` to `url` once; any 2xx is success. Never raises for network problems.

        The timeout bounds the whole attempt: resolution, connect, TLS, sending and
        reading the (truncated) response. Redirects are failures, never followed.
        """
        started = time.monotonic()
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) >= KNOWN_TARGETS:
                self._targets.clear()
            target = self._targets[url] = _target(url, self._allowed)
        if not isinstance(target, URL):
            return _failure(target, started)
        try:
            async with asyncio.timeout(self._timeout):
                status, received = await self._exchange(target, body, headers)
        except _NETWORK_ERRORS as exc:
            return _failure(_classify(exc), started)
        return _outcome(status, received, started)

    async def _exchange(
        self, target: URL, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        response = await self._open().post(
            target, data=body, headers=headers, allow_redirects=False
        )
        try:
            received = await _read_at_most(response, MAX_RESPONSE_BYTES)
        finally:
            # Only a connection whose answer was read to its end goes back to
            # the pool; one left early (a cut body, the deadline) is closed.
            if response.content.at_eof():
                response.release()
            else:
                response.close()
        return response.status, received

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=self._ssl_context,
                resolver=GuardedResolver(allowed=self._allowed, resolver=self._resolver),
                # Every new connection is resolved and checked afresh, as the guard asks.
                use_dns_cache=False,
                # No total here: attempts in flight are bounded where they are claimed.
                limit=0,
                limit_per_host=self._concurrency,
                keepalive_timeout=self._idle_seconds,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # Nothing read from the environment (proxies, netrc): the guard
                # sees the real destination, and no credentials leak to it.
                trust_env=False,
                # A receiver's cookies are never sent on, to it or to anyone.
                cookie_jar=aiohttp.DummyCookieJar(),
                # The answer's bytes are counted as they arrive, never decompressed.
                auto_decompress=False,
                headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
                skip_auto_headers=("Content-Type",),
                # The one deadline is the caller's asyncio.timeout.
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


async def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,  # noqa: ASYNC109 -- the deadline is applied with asyncio.timeout inside
    allowed_networks: Sequence[IPNetwork],
    ca_bundle: str | None,
    resolver: Resolver = system_resolver,
) -> DeliveryResult:
    """One delivery on a connection of its own; see `WebhookClient.post`.

    An unreadable `ca_bundle` is a configuration error and does raise.
    """
    client = WebhookClient(
        timeout=timeout, allowed_networks=allowed_networks, ca_bundle=ca_bundle, resolver=resolver
    )
    try:
        return await client.post(url, body, headers)
    finally:
        await client.aclose()


def _target(url: str, allowed: Sequence[IPNetwork]) -> URL | DeliveryError:
    # url_problem checks the host as aiohttp reads it, which matters because
    # aiohttp connects to an IP literal without asking the resolver. A stored URL
    # passed the same check at create, unless it was stored before a rule existed:
    # then it fails its attempts here, as any unusable URL does.
    problem = url_problem(url, allowed=allowed)
    if problem is None:
        try:
            return URL(url)
        except ValueError:
            return "invalid_url"
    return "refused_address" if problem == "refused_address" else "invalid_url"


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    # Raw bytes, counted as they arrive: a receiver cannot make us buffer an
    # endless or decompression-bombed body.
    received = bytearray()
    while len(received) < limit:
        chunk = await response.content.read(limit - len(received))
        if not chunk:
            break
        received += chunk
    return bytes(received)


def _outcome(status: int, excerpt: bytes, started: float) -> DeliveryResult:
    error: DeliveryError | None = None
    if 300 <= status < 400:
        error = "redirect"
    elif not 200 <= status < 300:
        error = "http_status"
    return DeliveryResult(status, error, _elapsed_ms(started), error is None, excerpt)


def _failure(error: DeliveryError, started: float) -> DeliveryResult:
    return DeliveryResult(None, error, _elapsed_ms(started), False)


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# ValueError (UnicodeError among them): a host the client or the system's IDNA
# codec cannot encode, which the URL check should have refused already.
_NETWORK_ERRORS = (GuardError, TimeoutError, OSError, aiohttp.ClientError, ValueError)


def _classify(exc: BaseException) -> DeliveryError:
    if isinstance(exc, RefusedDestinationError):
        return "refused_address"
    if isinstance(exc, UnresolvableHostError | aiohttp.ClientConnectorDNSError):
        return "dns_error"
    if isinstance(exc, aiohttp.InvalidURL | InvalidHostNameError):
        return "invalid_url"
    # aiohttp's own timeouts are TimeoutErrors too.
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientSSLError) or _caused_by_ssl_error(exc):
        return "tls_error"
    # After TLS: a failed certificate check is a ValueError too.
    if isinstance(exc, ValueError):
        return "invalid_url"
    # The receiver broke HTTP: closed before answering, or answered garbage.
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError | aiohttp.ClientResponseError | aiohttp.ClientPayloadError,
    ):
        return "protocol_error"
    if isinstance(exc, aiohttp.ClientConnectorError) or not isinstance(exc, aiohttp.ClientError):
        return "connect_error"
    return "network_error"


def _caused_by_ssl_error(exc: BaseException) -> bool:
    # A TLS failure after the handshake reaches us wrapped (ClientOSError,
    # a payload error), with the SSLError as its cause or context.
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ssl.SSLError):
            return True
        current = current.__cause__ or current.__context__
    return False


@functools.lru_cache(maxsize=8)
def _ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verification always on: certifi's roots, plus the operator's CA bundle if any."""
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle is not None:
        context.load_verify_locations(cafile=ca_bundle)
    return context
