"""One SMPP 3.4 transceiver bind over one TCP connection, on asyncio.

The session frames PDUs, numbers requests and pairs each response with its
request, answers the SMSC's own requests (enquire_link, unbind, deliver_sm),
keeps the link alive with enquire_link, and bounds how many submit_sm may be
outstanding. It knows nothing of carriers: `SmppCarrier` supervises it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from relay.carriers import smpp_codec as codec

__all__ = [
    "BindRefusedError",
    "DeliverHandler",
    "SessionClosedError",
    "SessionConfig",
    "SmppSession",
    "WindowTimeoutError",
]

_log = logging.getLogger(__name__)

# Larger than any PDU an SMSC sends us (deliver_sm tops out near 1 KiB); a
# bigger length means the stream is out of step, not a real PDU.
_MAX_PDU = 64 * 1024
_MAX_SEQUENCE = 0x7FFFFFFF

DeliverHandler = Callable[[codec.Pdu], Awaitable[int]]
"""Handles one deliver_sm and returns the command_status to answer it with."""


class SessionClosedError(Exception):
    """The session ended (or never bound) before the request was answered."""


class WindowTimeoutError(TimeoutError):
    """Every window slot stayed taken for a whole response timeout: nothing was sent."""

    def __init__(self, window: int) -> None:
        super().__init__(f"all {window} window slots stayed busy")


class BindRefusedError(SessionClosedError):
    """The SMSC answered bind_transceiver with a non-zero command_status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"bind refused with command_status 0x{status:08x}")
        self.status = status


@dataclass(frozen=True)
class SessionConfig:
    host: str
    port: int
    system_id: str
    password: str
    system_type: str
    window: int
    enquire_link_interval: float
    response_timeout: float
    # Connect and bind_transceiver_resp: a login, which an SMSC across the
    # internet may take longer over than a submit.
    bind_timeout: float


class SmppSession:
    """A bound transceiver session; build one with `SmppSession.open`."""

    def __init__(
        self,
        config: SessionConfig,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_deliver: DeliverHandler,
    ) -> None:
        self._config = config
        self._reader = reader
        self._writer = writer
        self._on_deliver = on_deliver
        self._sequence = 0
        self._pending: dict[int, asyncio.Future[codec.Pdu]] = {}
        self._window = asyncio.Semaphore(config.window)
        self._outstanding = 0
        self._closed = asyncio.Event()
        self._close_reason = "not closed"
        self._tasks: set[asyncio.Task[None]] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        # Frames written in one turn of the event loop, sent together at the
        # next: one system call for the many submits (and receipt answers)
        # that the same commit or the same read released.
        self._outbox: list[bytes] = []
        # Submits' deadlines, in the order they were sent: one timer for all of
        # them rather than one each, since every submit waits the same time.
        self._deadlines: collections.deque[tuple[float, int]] = collections.deque()
        self._expiry: asyncio.TimerHandle | None = None

    @classmethod
    async def open(cls, config: SessionConfig, on_deliver: DeliverHandler) -> SmppSession:
        """Connect and bind; raises OSError, TimeoutError or SessionClosedError."""
        async with asyncio.timeout(config.bind_timeout):
            reader, writer = await asyncio.open_connection(config.host, config.port)
        session = cls(config, reader, writer, on_deliver)
        session._spawn(session._read_loop())
        try:
            await session._bind()
        except BaseException:
            await session.close("bind failed")
            raise
        session._spawn(session._keep_alive())
        return session

    @property
    def is_open(self) -> bool:
        return not self._closed.is_set()

    @property
    def free_slots(self) -> int:
        return self._config.window - self._outstanding

    @property
    def close_reason(self) -> str:
        return self._close_reason

    async def submit(self, build: Callable[[int], bytes]) -> codec.Pdu:
        """Send the submit_sm `build(sequence)` makes once a window slot is free.

        Raises SessionClosedError; WindowTimeoutError when no slot frees up
        within the response timeout (nothing was sent); TimeoutError when the
        response does not come within it (the SMSC may have the message).
        """
        self._outstanding += 1
        try:
            if self._window.locked():
                async with asyncio.timeout(self._config.response_timeout):
                    await self._window.acquire()
            else:
                await self._window.acquire()  # a free slot: taken without waiting
        except TimeoutError:
            self._outstanding -= 1
            raise WindowTimeoutError(self._config.window) from None
        except BaseException:
            self._outstanding -= 1
            raise
        try:
            return await self._submit_once(build)
        finally:
            self._window.release()
            self._outstanding -= 1

    async def _submit_once(self, build: Callable[[int], bytes]) -> codec.Pdu:
        """`request` for submit_sm, without a timer of its own (see `_expire_overdue`)."""
        if self._closed.is_set():
            raise SessionClosedError(self._close_reason)
        sequence = self._next_sequence()
        answer: asyncio.Future[codec.Pdu] = asyncio.get_running_loop().create_future()
        self._pending[sequence] = answer
        self._expire_after(sequence)
        try:
            # Not drained: the window bounds what submits leave in the socket's
            # buffer, and an SMSC that stops reading fails them by their deadline.
            self._send_soon(build(sequence))
            return await answer
        finally:
            self._pending.pop(sequence, None)
            _settle(answer)

    async def request(
        self, build: Callable[[int], bytes], *, answer_within: float | None = None
    ) -> codec.Pdu:
        """Send a request and wait for its response (up to the response timeout)."""
        if self._closed.is_set():
            raise SessionClosedError(self._close_reason)
        sequence = self._next_sequence()
        answer: asyncio.Future[codec.Pdu] = asyncio.get_running_loop().create_future()
        self._pending[sequence] = answer
        try:
            # The write is inside the timeout too: an SMSC that stops reading
            # fills our send buffer, and drain() would wait for it forever.
            async with asyncio.timeout(answer_within or self._config.response_timeout):
                await self._write(build(sequence))
                return await answer
        finally:
            # A late response to a request we stopped waiting for is dropped.
            self._pending.pop(sequence, None)
            _settle(answer)

    async def unbind(self) -> None:
        """Say goodbye to the SMSC, then close; never raises."""
        if self._closed.is_set():
            return
        with contextlib.suppress(SessionClosedError, TimeoutError, OSError):
            await self.request(codec.unbind)
        await self.close("unbound by us")

    async def close(self, reason: str) -> None:
        """Close the connection and fail whatever still waits for a response."""
        self._mark_closed(reason)
        current = asyncio.current_task()
        tasks = [task for task in self._tasks | self._handlers if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def _bind(self) -> None:
        config = self._config
        answer = await self.request(
            lambda sequence: codec.bind_transceiver(
                sequence,
                system_id=config.system_id,
                password=config.password,
                system_type=config.system_type,
            ),
            answer_within=config.bind_timeout,
        )
        if answer.status != codec.ESME_ROK:
            raise BindRefusedError(answer.status)

    async def _read_loop(self) -> None:
        reason = "connection closed by the SMSC"
        try:
            while True:
                self._dispatch(codec.decode(await self._read_frame()))
        except (asyncio.IncompleteReadError, OSError) as exc:
            reason = f"connection lost: {type(exc).__name__}"
        except ValueError as exc:
            reason = f"stream out of step: {exc}"
        except _PeerUnboundError:
            reason = "unbound by the SMSC"
        except Exception:
            _log.exception("smpp session read loop failed")
            reason = "internal error"
        self._spawn_close(reason)

    async def _read_frame(self) -> bytes:
        head = await self._reader.readexactly(4)
        length = int.from_bytes(head, "big")
        if not codec.HEADER_SIZE <= length <= _MAX_PDU:
            raise ValueError(f"PDU length {length}")
        return head + await self._reader.readexactly(length - 4)

    def _dispatch(self, pdu: codec.Pdu) -> None:
        if pdu.is_response:
            answer = self._pending.get(pdu.sequence)
            if answer is not None and not answer.done():
                answer.set_result(pdu)
            return
        if pdu.command_id == codec.DELIVER_SM and not pdu.malformed:
            self._spawn_handler(pdu)
        elif pdu.command_id == codec.ENQUIRE_LINK:
            self._send_soon(codec.response(pdu.command_id, pdu.sequence))
        elif pdu.command_id == codec.ALERT_NOTIFICATION:
            return  # SMPP defines no response to it, and we have no use for it
        elif pdu.command_id == codec.UNBIND:
            self._send_soon(codec.response(pdu.command_id, pdu.sequence))
            raise _PeerUnboundError
        else:
            status = codec.ESME_RSYSERR if pdu.malformed else codec.ESME_RINVCMDID
            self._send_soon(codec.response(pdu.command_id, pdu.sequence, status))

    def _spawn_handler(self, pdu: codec.Pdu) -> None:
        # Each receipt gets its own task so a slow sink never stalls the
        # submit_sm_resp that follow it on the wire.
        task = asyncio.get_running_loop().create_task(self._handle_deliver(pdu))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _handle_deliver(self, pdu: codec.Pdu) -> None:
        try:
            status = await self._on_deliver(pdu)
        except Exception:
            _log.exception("smpp deliver_sm handler failed")
            status = codec.ESME_RX_T_APPN
        # Answered only once handled: if the session dies first, the SMSC resends.
        with contextlib.suppress(SessionClosedError):
            await self._write(codec.response(pdu.command_id, pdu.sequence, status))

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self._config.enquire_link_interval)
            try:
                await self.request(codec.enquire_link)
            except TimeoutError:
                self._spawn_close("enquire_link not answered")
                return
            except SessionClosedError:
                return

    def _send_soon(self, frame: bytes) -> None:
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(frame)

    def _flush(self) -> None:
        frames, self._outbox = self._outbox, []
        if not self._writer.is_closing():
            self._writer.write(b"".join(frames))

    async def _write(self, frame: bytes) -> None:
        if self._closed.is_set():
            raise SessionClosedError(self._close_reason)
        self._send_soon(frame)
        try:
            # Waits only while the socket's buffer is over its high-water mark.
            await self._writer.drain()
        except OSError as exc:
            reason = f"connection lost: {type(exc).__name__}"
            self._spawn_close(reason)
            raise SessionClosedError(reason) from exc

    def _expire_after(self, sequence: int) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + self._config.response_timeout
        self._deadlines.append((when, sequence))
        if self._expiry is None:
            self._expiry = loop.call_at(when, self._expire_overdue)

    def _expire_overdue(self) -> None:
        """Fail the submits whose deadline has passed with TimeoutError; wait for the next."""
        self._expiry = None
        loop = asyncio.get_running_loop()
        # Within a millisecond counts as passed: uvloop's clock and timers keep
        # milliseconds, so a timer may fire with its deadline still that far off.
        now = loop.time() + 0.001
        while self._deadlines:
            when, sequence = self._deadlines[0]
            if when > now:
                self._expiry = loop.call_at(when, self._expire_overdue)
                return
            self._deadlines.popleft()
            answer = self._pending.get(sequence)
            if answer is not None and not answer.done():
                answer.set_exception(TimeoutError())

    def _next_sequence(self) -> int:
        self._sequence = self._sequence % _MAX_SEQUENCE + 1
        return self._sequence

    def _mark_closed(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self._close_reason = reason
        self._closed.set()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(SessionClosedError(reason))
        self._pending.clear()

    def _spawn_close(self, reason: str) -> None:
        # Fail waiters now; the close itself (which cancels this very task's
        # siblings) runs in a task of its own.
        self._mark_closed(reason)
        self._spawn(self.close(reason))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _settle(answer: asyncio.Future[codec.Pdu]) -> None:
    """Mark an abandoned answer as seen, so asyncio does not log it as lost."""
    if not answer.done():
        answer.cancel()
    elif not answer.cancelled():
        answer.exception()


class _PeerUnboundError(Exception):
    """The SMSC sent unbind: answer it and end the session."""
