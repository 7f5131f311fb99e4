"""The HTTP edge, before any route runs: request ids, HTTPS only, body limits, and the
security headers of every answer (the one place that decides them)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay import errors as e
from relay.config import Settings
from relay.db.sql import DatabaseUnavailable, MustRetry
from relay.ids import new_id
from relay.log import begin_request, end_request
from relay.metrics import observe
from relay.web import access_line
from relay.web.bodies import replay
from relay.web.callers import base_url
from relay.web.errors import error_response
from relay.web.headers import headers_of
from relay.web.peers import is_trusted_peer

MAX_BODY = 64 * 1024
# How much of a refused body is read before answering, and for how long (`_drain`).
DRAIN_LIMIT = 1024 * 1024
DRAIN_TIMEOUT = 2.0
# Seconds a request may wait for the rest of a body it has started to send.
BODY_TIMEOUT = 10.0
_SHORT_BODY = e.InvalidRequest(
    "The body ended before its Content-Length; nothing more came.", param="Content-Length"
)
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
# Providers post delivery status callbacks as HTML forms (Twilio does).
CALLBACK_PREFIX = "/v1/carriers/"
# The console's pages post HTML forms too (relay.web.console).
CONSOLE_PREFIX = "/console/"
_FORM = b"application/x-www-form-urlencoded"
# Pages a browser renders: the console and the docs. No script at all, styles from
# our own files only, forms posting only here, never framed, never cached.
PAGE_PREFIXES = ("/console", "/docs")
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: with it, Chromium sends `Origin: null` on our own form posts.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
_PAGE_HEADER_BYTES = tuple(
    (name.lower().encode(), value.encode()) for name, value in PAGE_HEADERS.items()
)
_PAGE_STARTS = tuple(prefix + "/" for prefix in PAGE_PREFIXES)
log = logging.getLogger("relay.http")


class Edge:
    """What the edge decides of a request, for the chain of ASGI layers
    (`EdgeMiddleware`) and for the API's one pass (`relay.web.front`) alike."""

    def __init__(
        self,
        *,
        settings: Settings | None = None,
        route_name: Callable[[Scope], str] | None = None,
        hsts_seconds: int = 0,
    ) -> None:
        # Trusted proxies, and where absolute URLs in refusals point (`base_url`).
        self.settings = settings if settings is not None else Settings()
        self.trusted_proxies = tuple(self.settings.trusted_proxies)
        self.hsts: tuple[tuple[bytes, bytes], ...] = (
            ((b"strict-transport-security", f"max-age={hsts_seconds}".encode()),)
            if hsts_seconds > 0
            else ()
        )
        # Counts every answer under its route template when given (`relay.web.route_names`).
        self.route_name = route_name

    async def admit(self, scope: Scope, receive: Receive) -> tuple[bytes, e.RelayError | None]:
        """The request's whole body, or the edge's refusal (its body read and dropped)."""
        refusal = self._refusal(scope)
        body = b""
        if refusal is None and scope["method"] in _WITH_BODY:
            body, refusal = await _read_body(receive)
            if refusal is None:
                refusal = _length_mismatch(scope, len(body))
            elif isinstance(refusal, e.BodyTooLarge):
                await _drain(scope, receive)
        elif refusal is not None and scope["method"] in _WITH_BODY:
            await _drain(scope, receive)
        return body, refusal

    def refused(self, scope: Scope, refusal: e.RelayError) -> Response:
        return error_response(refusal, base_url=base_url(scope, self.settings))

    def failed(self, scope: Scope, fault: Exception, request_id: str) -> Response:
        """The answer to a request whose run raised, logged; call it where it was caught."""
        if isinstance(fault, DatabaseUnavailable | MustRetry):
            # An outage, or a deadlock victim whose retries ran out (its unit rolled
            # back): not a fault in Relay, so one line, no trace, and a 503 to retry.
            busy = isinstance(fault, MustRetry)
            event = "http.database_busy" if busy else "http.database_unavailable"
            log.warning("%s %s", event, fault, extra={"request_id": request_id})
            return self.refused(scope, e.DatabaseBusy() if busy else e.DatabaseUnreachable())
        # The trace goes to the log only; the client gets the bare envelope.
        log.exception("http.unhandled", extra={"request_id": request_id})
        return self.refused(scope, e.InternalError())

    def finish(self, scope: Scope, request_id: str, status: int, started: float) -> None:
        """The request's log line and its metric."""
        elapsed = time.perf_counter() - started
        if log.isEnabledFor(logging.INFO) and not access_line.written(
            log, request_id, scope["method"], scope["path"], status, round(elapsed * 1000, 2)
        ):
            # `log.info` less its search of the stack for the caller, which no line shows;
            # the fields set in one update, as `extra` would set them one by one after
            # checking each name against the record's own (these never are one).
            record = log.makeRecord(log.name, logging.INFO, __file__, 0, "http.request", (), None)
            record.__dict__.update(
                request_id=request_id,
                method=scope["method"],
                path=scope["path"],
                status=status,
                duration_ms=round(elapsed * 1000, 2),
            )
            log.handle(record)
        if self.route_name is not None:
            observe.http_request(self.route_name(scope), scope["method"], status, elapsed)

    def security_headers(self, scope: Scope) -> tuple[tuple[bytes, bytes], ...]:
        """HSTS on every HTTPS answer (never over plain HTTP: it would be a lie there), and
        the page headers on pages, unless the route set one itself (the stylesheet caches)."""
        added = self.hsts if self._is_https(scope) else ()
        path = scope["path"]
        if path in PAGE_PREFIXES or path.startswith(_PAGE_STARTS):
            added += _PAGE_HEADER_BYTES
        return added

    def _refusal(self, scope: Scope) -> e.RelayError | None:
        if not self._is_https(scope):
            return e.HttpsRequired()
        headers = headers_of(scope)
        length = headers.get(b"content-length")
        if length is not None and not length.isdigit():
            return e.InvalidRequest("Content-Length is not a number.", param="Content-Length")
        if length is not None and int(length) > MAX_BODY:
            return e.BodyTooLarge()
        has_body = length not in (None, b"0") or b"transfer-encoding" in headers
        if scope["method"] in _WITH_BODY and has_body:
            media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            path = scope["path"]
            is_form_path = path.startswith(CALLBACK_PREFIX) or path.startswith(CONSOLE_PREFIX)
            if media != b"application/json" and not (is_form_path and media == _FORM):
                return e.ContentTypeInvalid()
        return None

    def _is_https(self, scope: Scope) -> bool:
        if scope.get("scheme") == "https":
            return True
        if not is_trusted_peer(scope, self.trusted_proxies):
            return False
        return headers_of(scope).get(b"x-forwarded-proto") == b"https"


def edge_headers(
    headers: Iterable[tuple[bytes, bytes]], added: tuple[tuple[bytes, bytes], ...], request_id: str
) -> list[tuple[bytes, bytes]]:
    """An answer's headers as sent: the security headers it did not set, and its request id."""
    if added:
        headers = list(headers)
        present = {name.lower() for name, _ in headers}
        headers += [header for header in added if header[0] not in present]
    return [*headers, (b"request-id", request_id.encode())]


class EdgeMiddleware(Edge):
    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings | None = None,
        route_name: Callable[[Scope], str] | None = None,
        hsts_seconds: int = 0,
    ) -> None:
        super().__init__(settings=settings, route_name=route_name, hsts_seconds=hsts_seconds)
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_id("req")
        context = begin_request(request_id)
        try:
            await self._answer(scope, receive, send, request_id)
        finally:
            end_request(context)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        started = time.perf_counter()
        status_seen = 0
        added = self.security_headers(scope)

        async def send_with_id(message: Message) -> None:
            nonlocal status_seen
            if message["type"] == "http.response.start":
                status_seen = message["status"]
                message["headers"] = edge_headers(message.get("headers", ()), added, request_id)
            await send(message)

        body, refusal = await self.admit(scope, receive)
        if refusal is not None:
            await self.refused(scope, refusal)(scope, receive, send_with_id)
        else:
            try:
                await self.app(scope, replay(body, receive), send_with_id)
            except Exception as fault:
                answer = self.failed(scope, fault, request_id)
                if status_seen:
                    raise
                await answer(scope, receive, send_with_id)
        self.finish(scope, request_id, status_seen, started)


async def _read_body(receive: Receive) -> tuple[bytes, e.RelayError | None]:
    """Read the whole body first: Content-Length may be absent (chunked) or lie."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if chunks:
            # A client that declared more than it sends would hold the request open forever.
            try:
                async with asyncio.timeout(BODY_TIMEOUT):
                    message = await receive()
            except TimeoutError:
                return b"", _SHORT_BODY
        else:
            message = await receive()
        if message["type"] != "http.request":
            return b"", None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return b"", e.BodyTooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


async def _drain(scope: Scope, receive: Receive) -> None:
    """Read and drop the rest of a refused request's body, up to `DRAIN_LIMIT` bytes.

    Closing a connection with bytes still unread makes the kernel reset it, and a
    client still sending its body then loses the refusal. Reading what it declared
    first lets the answer reach it (Apache and nginx call this a lingering close).
    A body past the bound, or one that stalls, is not waited for.
    """
    length = headers_of(scope).get(b"content-length")
    if length is not None and length.isdigit() and int(length) > DRAIN_LIMIT:
        return
    read = 0
    try:
        async with asyncio.timeout(DRAIN_TIMEOUT):
            while read <= DRAIN_LIMIT:
                message = await receive()
                if message["type"] != "http.request":
                    return
                read += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return
    except TimeoutError:
        return


def _length_mismatch(scope: Scope, size: int) -> e.RelayError | None:
    """A Content-Length that does not match the body read. HTTP servers frame a body
    by its length, so this is what is left to see when one does not."""
    length = headers_of(scope).get(b"content-length")
    if length is None or int(length) == size:
        return None
    return e.InvalidRequest(
        f"Content-Length says {int(length)} bytes; the body has {size}.", param="Content-Length"
    )
