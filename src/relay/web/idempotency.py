"""Idempotency-Key on POST: the first answer is stored and replayed byte for byte.

Runs inside EdgeMiddleware (HTTPS checked, body buffered and capped) and after the
rate limit, so refused requests never claim a key. The response is held back until
it is stored: a client retrying the moment it gets an answer must find the key done,
not in use.
"""

from __future__ import annotations

import contextlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay.accounts.models import Scope as DataScope
from relay.errors import ParameterInvalid, RelayError
from relay.idempotency import claims
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
REPLAYED = (b"idempotent-replayed", b"true")


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp, *, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_key = dict(scope["headers"]).get(HEADER) if scope["type"] == "http" else None
        # Carrier callbacks take no API key: whatever they carry is neither looked up nor
        # kept before their signature is checked.
        if (
            raw_key is None
            or scope["method"] != "POST"
            or scope["path"].startswith(CALLBACK_PREFIX)
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
        try:
            outcome = await keys.begin(owner, key, request_hash)
        except RelayError as refusal:
            await error_response(refusal, base_url=base_url(scope, self.services.settings))(
                scope, receive, send
            )
            return
        if isinstance(outcome, Replay):
            await _send(send, outcome.response, replayed=True)
            return
        if isinstance(outcome, Recover):
            # The change was made; what it is now is the answer, made once and kept.
            found = await _capture(self.app, _get(scope, outcome.resource_path), _nothing)
            if is_storable(found.status):
                await keys.recovered(owner, key, request_hash, outcome, found)
            await _send(send, found, replayed=True)
            return
        token = claims.running(outcome)
        try:
            response = await _capture(self.app, scope, replay(body, receive))
        except BaseException:
            # Crashed or cancelled: if the change committed, the next try gets it at once.
            with contextlib.suppress(Exception):
                await keys.let_go(outcome)
            raise
        finally:
            claims.done(token)
        if is_storable(response.status):
            await keys.keep(outcome, response)
        else:
            await keys.let_go(outcome)
        await _send(send, response, replayed=False)


def _get(scope: Scope, path: str) -> Scope:
    """The same caller's GET of `path`."""
    return {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b""}


async def _nothing() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _capture(app: ASGIApp, scope: Scope, receive: Receive) -> StoredResponse:
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def keep(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend(
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, keep)
    return StoredResponse(status, tuple(headers), b"".join(chunks))


async def _send(send: Send, response: StoredResponse, *, replayed: bool) -> None:
    headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers
    ]
    if replayed:
        headers.append(REPLAYED)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})
