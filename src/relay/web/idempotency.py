"""Idempotency-Key on POST: the first answer is kept with its change and replayed byte
for byte.

Runs inside EdgeMiddleware (HTTPS checked, body buffered and capped) and after the
rate limit, so refused requests never claim a key. Nothing is read before the
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
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

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
from relay.web.middleware import CALLBACK_PREFIX

HEADER = b"idempotency-key"
API_PREFIX = "/v1/"
REPLAYED = (b"idempotent-replayed", b"true")
T = TypeVar("T")


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp, *, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_key = dict(scope["headers"]).get(HEADER) if scope["type"] == "http" else None
        # The API's POSTs only, each of which takes its key in the unit of its change.
        # Carrier callbacks take no API key: whatever they carry is neither looked up nor
        # kept before their signature is checked. The console's forms are not the API.
        path = scope["path"] if raw_key is not None else ""
        if (
            raw_key is None
            or scope["method"] != "POST"
            or not path.startswith(API_PREFIX)
            or path.startswith(CALLBACK_PREFIX)
        ):
            await self.app(scope, receive, send)
            return
        caller = await scope_caller(scope, self.services)
        if caller is None:
            await self.app(scope, receive, send)  # the route answers 401, and nothing is kept
            return
        key = raw_key.decode("latin-1")
        if not key_is_valid(key):
            problem = ParameterInvalid(
                f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters.",
                param="Idempotency-Key",
            )
            await error_response(problem, base_url=base_url(scope, self.services.settings))(
                scope, receive, send
            )
            return
        await self._run(scope, receive, send, caller.scope, key)

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, owner: DataScope, key: str
    ) -> None:
        body = await read_body(receive)
        request_hash = fingerprint(scope["method"], scope["path"], scope["query_string"], body)
        keys = self.services.idempotency
        claim = keys.claim(owner, key, request_hash)
        token = claims.running(claim)
        try:
            response = await _capture(self.app, scope, replay(body, receive), claim, send)
        except KeyTaken as taken:
            await self._answer_from(scope, receive, send, claim, taken)
            return
        except BaseException:
            # Crashed or cancelled: if the change committed, the next try gets it at once.
            with contextlib.suppress(Exception):
                await keys.let_go(claim)
            raise
        finally:
            claims.done(token)
        if response is None:
            return  # kept with its change, and sent as it was made
        if claim.kept is None:
            if claim.took:
                # The change committed with the key; its answer came after the unit.
                if is_storable(response.status):
                    await keys.keep(claim, response)
                else:
                    await keys.let_go(claim)
            elif not await self._settled(scope, receive, send, claim, response):
                return
        await _send(send, response, replayed=False)

    async def _settled(
        self, scope: Scope, receive: Receive, send: Send, claim: Pending, response: StoredResponse
    ) -> bool:
        """No unit took the key (a refusal, an error, a 404): the record of another try,
        if one lives, answers instead (False: answered). Otherwise this answer stands
        (True), kept if it may be."""
        try:
            outcome = await self.services.idempotency.settle(claim)
        except RelayError as refusal:
            await self._refuse(scope, receive, send, refusal)
            return False
        if outcome is not None:
            await self._replay(scope, send, claim, outcome)
            return False
        if is_storable(response.status):
            await self.services.idempotency.keep(claim, response)
        return True

    async def _answer_from(
        self, scope: Scope, receive: Receive, send: Send, claim: Pending, taken: KeyTaken
    ) -> None:
        try:
            outcome = self.services.idempotency.taken(claim, taken.record)
        except RelayError as refusal:
            await self._refuse(scope, receive, send, refusal)
            return
        await self._replay(scope, send, claim, outcome)

    async def _replay(
        self, scope: Scope, send: Send, claim: Pending, outcome: Replay | Recover
    ) -> None:
        if isinstance(outcome, Replay):
            await _send(send, outcome.response, replayed=True)
            return
        # The change was made; what it is now is the answer, made once and kept.
        found = await _capture(self.app, _get(scope, outcome.resource_path), _nothing)
        assert found is not None
        if is_storable(found.status):
            await self.services.idempotency.recovered(claim, outcome, found)
        await _send(send, found, replayed=True)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, refusal: RelayError
    ) -> None:
        answer = error_response(refusal, base_url=base_url(scope, self.services.settings))
        await answer(scope, receive, send)


def renders(render: Callable[[T, datetime], Response]) -> Pending | None:
    """The running request's claim, if it came with a key: the unit of work that makes
    its change keeps the answer `render` makes (in the writer's task: `render` must not
    bind log fields or touch the request)."""
    claim = claims.pending()
    if claim is not None:
        claim.render = lambda result, now: stored(render(result, now))
    return claim


def answer(
    claim: Pending | None, result: T, now: datetime, render: Callable[[T, datetime], Response]
) -> Response:
    """The answer kept with the request's key when its unit kept one (byte for byte what
    a retry is replayed), else `render`'s."""
    kept = None if claim is None else claim.kept
    if kept is None:
        return render(result, now)
    response = Response(kept.body, kept.status)
    response.raw_headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in kept.headers
    ]
    return response


def stored(response: Response) -> StoredResponse:
    headers = tuple(
        (name.decode("latin-1"), value.decode("latin-1")) for name, value in response.raw_headers
    )
    return StoredResponse(response.status_code, headers, bytes(response.body))


def _get(scope: Scope, path: str) -> Scope:
    """The same caller's GET of `path`."""
    return {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b""}


async def _nothing() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _capture(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    claim: Pending | None = None,
    send: Send | None = None,
) -> StoredResponse | None:
    """The app's answer, held back; None if it was sent on as it came (`send`): the
    answer `claim` kept with the change, already stored."""
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []
    forwarded = False

    async def keep(message: Message) -> None:
        nonlocal status, forwarded
        if send is not None and (forwarded or (claim is not None and claim.kept is not None)):
            forwarded = True
            await send(message)
            return
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend(
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, keep)
    if forwarded:
        return None
    return StoredResponse(status, tuple(headers), b"".join(chunks))


async def _send(send: Send, response: StoredResponse, *, replayed: bool) -> None:
    headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers
    ]
    if replayed:
        headers.append(REPLAYED)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})
