"""Idempotency-Key on POST: the first answer is kept with its change and replayed byte
for byte.

Runs after the edge (HTTPS checked, body buffered and capped) and after the rate
limit, so refused requests never claim a key. Nothing is read before the
request runs: it runs with a claim (`relay.idempotency.claims`), and the unit of
work that makes its change takes the key first among its writes, with the answer
the route renders (`renders`, `answer`). A unit that finds the key held writes
nothing and raises `KeyTaken`; the answer then comes from the record it found.
An answer no unit kept (an error, or one known only after a carrier's answer over
the network) is stored here before it is sent, so a client retrying the moment it
gets an answer finds the key done, not in use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay.accounts.models import Scope as DataScope
from relay.errors import ParameterInvalid, RelayError
from relay.idempotency import claims
from relay.idempotency.claims import KeyTaken, Pending
from relay.idempotency.models import (
    MAX_KEY_LENGTH,
    Recover,
    Replay,
    StoredResponse,
    fingerprint,
    is_storable,
    key_is_valid,
)
from relay.services import Services
from relay.web.bodies import read_body, replay
from relay.web.callers import base_url, scope_caller
from relay.web.errors import error_response
from relay.web.headers import headers_of
from relay.web.middleware import CALLBACK_PREFIX

HEADER = b"idempotency-key"
API_PREFIX = "/v1/"
REPLAYED = (b"idempotent-replayed", b"true")
T = TypeVar("T")


# What answers a request of the API with its body: the route, reached one way or another.
Answer = Callable[[Scope, bytes], Awaitable[Response]]


class Keys:
    """Idempotency-Key on the API's POSTs, for the chain of ASGI layers
    (`IdempotencyMiddleware`) and the API's one pass (`relay.web.front`) alike."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def key_of(self, scope: Scope) -> bytes | None:
        """The request's key, if it is one to honour."""
        raw_key = headers_of(scope).get(HEADER)
        # The API's POSTs only, each of which takes its key in the unit of its change.
        # Carrier callbacks take no API key: whatever they carry is neither looked up nor
        # kept before their signature is checked. The console's forms are not the API.
        if raw_key is None or scope["method"] != "POST":
            return None
        path = scope["path"]
        if not path.startswith(API_PREFIX) or path.startswith(CALLBACK_PREFIX):
            return None
        return raw_key

    async def answer(self, scope: Scope, body: bytes, raw_key: bytes, run: Answer) -> Response:
        caller = await scope_caller(scope, self.services)
        if caller is None:
            return await run(scope, body)  # the route answers 401, and nothing is kept
        key = raw_key.decode("latin-1")
        if not key_is_valid(key):
            problem = ParameterInvalid(
                f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters.",
                param="Idempotency-Key",
            )
            return self._refuse(scope, problem)
        return await self._run(scope, body, caller.scope, key, run)

    async def _run(
        self, scope: Scope, body: bytes, owner: DataScope, key: str, run: Answer
    ) -> Response:
        request_hash = fingerprint(scope["method"], scope["path"], scope["query_string"], body)
        keys = self.services.idempotency
        claim = keys.claim(owner, key, request_hash)
        token = claims.running(claim)
        try:
            response = await run(scope, body)
        except KeyTaken as taken:
            return await self._answer_from(scope, claim, taken, run)
        except BaseException:
            # Crashed or cancelled: if the change committed, the next try gets it at once.
            with contextlib.suppress(Exception):
                await keys.let_go(claim)
            raise
        finally:
            claims.done(token)
        if claim.kept is not None:
            return response  # kept with its change, and sent as it was made
        if claim.took:
            # The change committed with the key; its answer came after the unit.
            if is_storable(response.status_code):
                await keys.keep(claim, stored(response))
            else:
                await keys.let_go(claim)
            return response
        return await self._settled(scope, claim, response, run)

    async def _settled(
        self, scope: Scope, claim: Pending, response: Response, run: Answer
    ) -> Response:
        """No unit took the key (a refusal, an error, a 404): the record of another try,
        if one lives, answers instead. Otherwise this answer stands, kept if it may be."""
        try:
            outcome = await self.services.idempotency.settle(claim)
        except RelayError as refusal:
            return self._refuse(scope, refusal)
        if outcome is not None:
            return await self._replay(scope, claim, outcome, run)
        if is_storable(response.status_code):
            await self.services.idempotency.keep(claim, stored(response))
        return response

    async def _answer_from(
        self, scope: Scope, claim: Pending, taken: KeyTaken, run: Answer
    ) -> Response:
        try:
            outcome = self.services.idempotency.taken(claim, taken.record)
        except RelayError as refusal:
            return self._refuse(scope, refusal)
        return await self._replay(scope, claim, outcome, run)

    async def _replay(
        self, scope: Scope, claim: Pending, outcome: Replay | Recover, run: Answer
    ) -> Response:
        if isinstance(outcome, Replay):
            return _replayed(outcome.response)
        # The change was made; what it is now is the answer, made once and kept.
        found = stored(await run(_get(scope, outcome.resource_path), b""))
        if is_storable(found.status):
            await self.services.idempotency.recovered(claim, outcome, found)
        return _replayed(found)

    def _refuse(self, scope: Scope, refusal: RelayError) -> Response:
        return error_response(refusal, base_url=base_url(scope, self.services.settings))


class IdempotencyMiddleware:
    """Runs inside EdgeMiddleware (HTTPS checked, body buffered and capped) and after
    the rate limit, so refused requests never claim a key."""

    def __init__(self, app: ASGIApp, *, services: Services) -> None:
        self.app = app
        self.keys = Keys(services)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_key = self.keys.key_of(scope) if scope["type"] == "http" else None
        if raw_key is None:
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)

        async def run(asked: Scope, with_body: bytes) -> Response:
            received = replay(with_body, receive) if asked is scope else _nothing
            return await _capture(self.app, asked, received)

        response = await self.keys.answer(scope, body, raw_key, run)
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": response.raw_headers,
            }
        )
        await send({"type": "http.response.body", "body": response.body, "more_body": False})


class _Rendering:
    """`render` for the unit, holding the answer it made last: the one the unit kept is
    sent as it was made, not made again from its stored copy."""

    __slots__ = ("made", "render")

    def __init__(self, render: Callable[[Any, datetime], Response]) -> None:
        self.render = render
        self.made: tuple[StoredResponse, Response] | None = None

    def __call__(self, result: Any, now: datetime) -> StoredResponse:
        response = self.render(result, now)
        kept = stored(response)
        self.made = (kept, response)
        return kept


def renders(render: Callable[[T, datetime], Response]) -> Pending | None:
    """The running request's claim, if it came with a key: the unit of work that makes
    its change keeps the answer `render` makes (in the writer's task: `render` must not
    bind log fields or touch the request)."""
    claim = claims.pending()
    if claim is not None:
        claim.render = _Rendering(render)
    return claim


def answer(
    claim: Pending | None, result: T, now: datetime, render: Callable[[T, datetime], Response]
) -> Response:
    """The answer kept with the request's key when its unit kept one (byte for byte what
    a retry is replayed), else `render`'s."""
    kept = None if claim is None else claim.kept
    if kept is None:
        return render(result, now)
    assert claim is not None
    rendering = claim.render
    if isinstance(rendering, _Rendering) and rendering.made is not None:
        made, response = rendering.made
        if made is kept:
            return response
    response = Response(kept.body, kept.status)
    response.raw_headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in kept.headers
    ]
    return response


def stored(response: Response) -> StoredResponse:
    head = tuple(response.raw_headers)
    headers = _HEAD_TEXTS.get(head)
    if headers is None:
        if len(_HEAD_TEXTS) >= _HEADS_KEPT:
            _HEAD_TEXTS.clear()
        headers = _HEAD_TEXTS[head] = tuple(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in head
        )
    return StoredResponse(response.status_code, headers, bytes(response.body))


# An answer's headers as the key's record keeps them, per head: the API's answers have
# few heads (a JSON body's length and type, a refusal's few more), each decoded once.
_HEAD_TEXTS: dict[tuple[tuple[bytes, bytes], ...], tuple[tuple[str, str], ...]] = {}
_HEADS_KEPT = 4096


def _get(scope: Scope, path: str) -> Scope:
    """The same caller's GET of `path`."""
    return {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b""}


async def _nothing() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _capture(app: ASGIApp, scope: Scope, receive: Receive) -> Response:
    """The app's answer, held back."""
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def keep(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, keep)
    response = Response(b"".join(chunks), status)
    response.raw_headers = headers
    return response


def _replayed(response: StoredResponse) -> Response:
    answer = Response(response.body, response.status)
    answer.raw_headers = [
        *((name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers),
        REPLAYED,
    ]
    return answer
