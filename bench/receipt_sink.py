"""The dlr-url target the reference gateways (Kannel, Jasmin) post their delivery
receipts to: a minimal keep-alive HTTP/1.1 server counting each message's first
"delivered" receipt, timed, so that a run reports receipts a second."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from urllib.parse import parse_qs, urlsplit

# A receipt's query (or form body) → the id of the message it says was delivered,
# or None for any other receipt (failed, intermediate).
Delivered = Callable[[dict[str, list[str]]], Hashable | None]


async def read_head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
    """An HTTP/1.1 message's first line and its headers (names in lower case)."""
    head = await reader.readuntil(b"\r\n\r\n")
    first_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return first_line, headers


class ReceiptSink:
    def __init__(self, delivered_of: Delivered, answer: bytes = b"") -> None:
        self._delivered_of = delivered_of
        # A gateway that wants a body of its own in the answer (Jasmin retries otherwise).
        self._answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer)
        self.delivered: set[Hashable] = set()
        self.delivered_at: list[float] = []
        self.other = 0
        self.last_at = 0.0
        self.progress = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line, headers = await read_head(reader)
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                target = request_line.split(" ")[1]
                self._record(parse_qs(urlsplit(target).query or body.decode("latin-1")))
                writer.write(self._answer)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _record(self, query: dict[str, list[str]]) -> None:
        message = self._delivered_of(query)
        if message is None:
            self.other += 1
        elif message not in self.delivered:
            self.delivered.add(message)
            self.last_at = time.perf_counter()
            self.delivered_at.append(self.last_at)
        self.progress.set()

    def steady_rate(self) -> float:
        """Receipts a second between the tenth and the ninetieth percentile of arrivals."""
        count = len(self.delivered_at)
        low, high = count // 10, count * 9 // 10
        if high - low < 2:
            return float("nan")
        return (high - low) / (self.delivered_at[high] - self.delivered_at[low])
