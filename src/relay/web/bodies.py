"""Request bodies between ASGI layers: the edge reads and caps a body once, then
hands it on as a single message that inner layers may read and hand on again."""

from __future__ import annotations

from starlette.types import Message, Receive


async def read_body(receive: Receive) -> bytes:
    """The whole body, from however many messages it comes in."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that answers `body` first, then whatever `receive` answers (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
