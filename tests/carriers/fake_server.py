"""What every local HTTP provider fake shares: a loopback server, scripted answers, billing.

Each provider's fake (`twilio_fake`, `telnyx_fake`, ...) speaks its own
documented protocol; the scripting of odd answers (an error, a hang), the
server and the segment arithmetic providers bill by are the same for all.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import math
import secrets
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.carriers.callbacks import SECRET_PARAM

# GSM 03.38: the basic table (one septet) and its extension (two septets).
# Kept apart from relay.sms.encoding so that one cannot excuse the other.
_GSM_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM_EXTENSION = frozenset("^{}\\[~]|€\f")

# How a fake signs the callback it posts: as the provider does, with a wrong
# secret, too long ago, or not at all (the URL's secret then goes, or is guessed).
Signing = Literal["signed", "forged", "stale", "unsigned"]


def billed_segments(text: str) -> int:
    """Segments a provider bills: 160/153 GSM septets, or 70/67 UCS-2 units per part."""
    if all(ch in _GSM_BASIC or ch in _GSM_EXTENSION for ch in text):
        units = sum(2 if ch in _GSM_EXTENSION else 1 for ch in text)
        single, part = 160, 153
    else:
        units = len(text.encode("utf-16-le")) // 2
        single, part = 70, 67
    return 1 if units <= single else math.ceil(units / part)


def is_unicode(text: str) -> bool:
    return not all(ch in _GSM_BASIC or ch in _GSM_EXTENSION for ch in text)


@dataclass(frozen=True)
class Reply:
    """Answer the next send with this status, body and headers."""

    status: int
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def response(self) -> Response:
        return JSONResponse(self.body, status_code=self.status, headers=dict(self.headers))


@dataclass(frozen=True)
class Hang:
    """Never answer the next send (until `reset` or the fake stops)."""


@dataclass
class Script:
    """Steps the next sends take instead of the fake's normal answer, in order."""

    steps: deque[Any] = field(default_factory=deque)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def then(self, *steps: Any) -> None:
        self.steps.extend(steps)

    def next(self) -> Any | None:
        return self.steps.popleft() if self.steps else None

    async def hang(self) -> Response:
        await self.release.wait()
        return Response(status_code=504)

    def reset(self) -> None:
        """Forget every step, and let any hung request finish."""
        self.release.set()
        self.release = asyncio.Event()
        self.steps.clear()


Sent = TypeVar("Sent")
Stored = TypeVar("Stored")


@dataclass(kw_only=True)
class FakeAccount(Generic[Sent, Stored]):
    """What every provider fake's account keeps: where it listens, what it was sent, its script.

    A provider's fake names its own credentials and `routes`; `received` holds
    the sends as they came, `messages` what the fake made of them, by id.
    """

    base_url: str = ""
    received: list[Sent] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    messages: dict[str, Stored] = field(default_factory=dict)
    script: Script = field(default_factory=Script)

    def routes(self) -> list[Route]:
        raise NotImplementedError

    def then(self, *steps: object) -> None:
        self.script.then(*steps)

    def reset(self) -> None:
        """Forget every request and message, and let any hung request finish."""
        self.script.reset()
        self.received.clear()
        self.violations.clear()
        self.messages.clear()

    def end_test(self) -> list[str]:
        """What the carrier broke of the provider's contract in a test, then the test forgotten."""
        violations = list(self.violations)
        self.reset()
        return violations

    @asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        async with serve(Starlette(routes=self.routes())) as base_url:
            self.base_url = base_url
            try:
                yield base_url
            finally:
                self.script.release.set()


def impostor_url(url: str, signing: str) -> str:
    """A callback URL as an impostor would know it: without the carrier's secret
    ("unsigned"), with a guessed one (any other but "signed"), or as given."""
    if signing == "signed":
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != SECRET_PARAM]
    if signing != "unsigned":
        query.append((SECRET_PARAM, "guessed-" + secrets.token_hex(4)))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def basic_credentials(request: Request) -> tuple[str, str] | None:
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return user, password


def bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def post_callback(
    url: str,
    *,
    verify: ssl.SSLContext | bool,
    headers: Mapping[str, str] | None = None,
    content: bytes | str | None = None,
    data: Mapping[str, str] | None = None,
) -> int:
    """POST one callback to Relay as the provider does; the status Relay answers with."""
    async with httpx.AsyncClient(timeout=5, verify=verify) as client:
        answer = await client.post(url, content=content, data=data, headers=headers)
    return answer.status_code


@asynccontextmanager
async def serve(app: Starlette) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port for the length of the block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        http="h11",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextmanager
def closed_port() -> Iterator[str]:
    """A loopback URL whose port is bound but not listening: connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
