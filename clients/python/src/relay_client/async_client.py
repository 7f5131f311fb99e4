"""`AsyncRelay`: the asyncio client, `Relay`'s twin; only the waiting differs."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

import httpx

from relay_client import calls
from relay_client.calls import Call
from relay_client.core import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, Core, Verify, tls_verify
from relay_client.objects import Channel, Erasure, Event, Message, Verification, VerificationStatus

T = TypeVar("T")


class AsyncRelay:
    """A Relay API client for asyncio; one per application is enough (it pools connections).

    `api_key` defaults to `RELAY_API_KEY`, `base_url` to `RELAY_BASE_URL` or
    https://127.0.0.1:8443. `verify` is httpx's: True, False, an SSLContext,
    or the path of a CA bundle (e.g. a self-signed server's cert.pem). With your
    own `http_client`, its timeout and TLS settings apply instead.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        verify: Verify = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._core = Core.configure(api_key, base_url, max_retries)
        self._http = http_client or httpx.AsyncClient(
            timeout=timeout, verify=tls_verify(verify), follow_redirects=False
        )
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self.verifications = AsyncVerifications(self)
        self.messages = AsyncMessages(self)
        self.events = AsyncEvents(self)
        self.erasures = AsyncErasures(self)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRelay:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _request(self, call: Call) -> Any:
        outgoing = self._core.prepare(call)
        for attempt in itertools.count():
            try:
                response = await self._http.request(
                    outgoing.method,
                    outgoing.url,
                    headers=outgoing.headers,
                    params=outgoing.params,
                    content=outgoing.content,
                )
            except httpx.TransportError as error:
                delay = self._core.retry_delay_after_error(attempt, error)
            else:
                retry = self._core.retry_delay(attempt, response)
                if retry is None:
                    return self._core.read(response)
                delay = retry
            await self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _pages(self, first: Call) -> AsyncIterator[Any]:
        call: Call | None = first
        while call is not None:
            page = await self._request(call)
            for item in page["data"]:
                yield item
            call = calls.next_page(call, page)


class AsyncPaginator(Generic[T]):
    """Every item of a list, newest first, fetching pages as `async for` reaches them."""

    def __init__(self, client: AsyncRelay, first: Call) -> None:
        self._client = client
        self._first = first

    def __aiter__(self) -> AsyncIterator[T]:
        return cast(AsyncIterator[T], self._client._pages(self._first))


class AsyncVerifications:
    def __init__(self, client: AsyncRelay) -> None:
        self._client = client

    async def create(
        self,
        to: str,
        *,
        channel: Channel | None = None,
        channels: Sequence[Channel] | None = None,
        webhook_url: str | None = None,
        metadata: Mapping[str, str] | None = None,
        code_length: int | None = None,
        ttl: int | None = None,
        locale: str | None = None,
        idempotency_key: str | None = None,
    ) -> Verification:
        """Send a code to `to` on `channel` (sms, the default; whatsapp; email), or on
        `channels` in order, each tried when the one before fails; for a destination with a
        pending verification, resend it (on the channels given now).

        `to` is a number in E.164 for sms and whatsapp, an email address for email.
        """
        call = calls.create_verification(
            to,
            channel=channel,
            channels=channels,
            webhook_url=webhook_url,
            metadata=metadata,
            code_length=code_length,
            ttl=ttl,
            locale=locale,
            idempotency_key=idempotency_key,
        )
        return cast(Verification, await self._client._request(call))

    async def check(
        self,
        code: str,
        *,
        id: str | None = None,
        to: str | None = None,
        idempotency_key: str | None = None,
    ) -> Verification:
        """Submit `code` for verification `id`, or for `to`'s pending verification."""
        call = calls.check_verification(code, id=id, to=to, idempotency_key=idempotency_key)
        return cast(Verification, await self._client._request(call))

    async def retrieve(self, id: str) -> Verification:
        return cast(Verification, await self._client._request(calls.retrieve_verification(id)))

    async def cancel(self, id: str, *, idempotency_key: str | None = None) -> Verification:
        call = calls.cancel_verification(id, idempotency_key=idempotency_key)
        return cast(Verification, await self._client._request(call))

    def list(
        self,
        *,
        status: VerificationStatus | None = None,
        to: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        starting_after: str | None = None,
        ending_before: str | None = None,
    ) -> AsyncPaginator[Verification]:
        """`limit` is the page size; iteration goes on to the last page."""
        call = calls.list_verifications(
            limit=limit,
            status=status,
            to=to,
            created_gte=created_gte,
            created_lt=created_lt,
            starting_after=starting_after,
            ending_before=ending_before,
        )
        return AsyncPaginator(self._client, call)


class AsyncMessages:
    def __init__(self, client: AsyncRelay) -> None:
        self._client = client

    async def send(
        self,
        to: str,
        *,
        code: str,
        webhook_url: str | None = None,
        metadata: Mapping[str, str] | None = None,
        locale: str | None = None,
        idempotency_key: str | None = None,
    ) -> Message:
        """Deliver your own `code` to `to`."""
        call = calls.send_message(
            to,
            code=code,
            webhook_url=webhook_url,
            metadata=metadata,
            locale=locale,
            idempotency_key=idempotency_key,
        )
        return cast(Message, await self._client._request(call))

    async def retrieve(self, id: str) -> Message:
        return cast(Message, await self._client._request(calls.retrieve_message(id)))


class AsyncEvents:
    def __init__(self, client: AsyncRelay) -> None:
        self._client = client

    async def retrieve(self, id: str) -> Event:
        return cast(Event, await self._client._request(calls.retrieve_event(id)))

    def list(
        self,
        *,
        related: str | None = None,
        type: str | None = None,
        delivery_status: str | None = None,
        limit: int | None = None,
        starting_after: str | None = None,
        ending_before: str | None = None,
    ) -> AsyncPaginator[Event]:
        """Events newest first; `related=` a verification or message id narrows them."""
        call = calls.list_events(
            related=related,
            type=type,
            delivery_status=delivery_status,
            limit=limit,
            starting_after=starting_after,
            ending_before=ending_before,
        )
        return AsyncPaginator(self._client, call)


class AsyncErasures:
    def __init__(self, client: AsyncRelay) -> None:
        self._client = client

    async def create(self, to: str, *, idempotency_key: str | None = None) -> Erasure:
        """Delete every verification and message of this key's account and mode sent to
        `to` (a number in E.164 or an email address), with all that names it; the counts
        of what was deleted, per kind."""
        call = calls.create_erasure(to, idempotency_key=idempotency_key)
        return cast(Erasure, await self._client._request(call))
