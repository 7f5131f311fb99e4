"""Request bodies between ASGI layers: the edge reads and caps a body once, then
hands it on as a single message that inner layers may read and hand on again."""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import Message, Receive

from relay.errors import InvalidJson


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


# Deep enough for any body the API takes (metadata is two levels), shallow enough
# that walking or re-serialising a document never nears Python's recursion limit.
MAX_DEPTH = 32


class _DuplicateKey(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _DuplicateKey("duplicate key")
    return found


# One decoder for every body: `json.loads` with a hook builds a decoder, and its
# scanner, per call.
_DECODER = json.JSONDecoder(object_pairs_hook=_object)
# A surrogate can reach a decoded string only from a `\uD800`-`\uDFFF` escape: a
# body without one has none (an escaped backslash before "uD8" only costs the walk).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def decode_json(body: bytes) -> Any:
    """The JSON document in `body`, or InvalidJson: the body must be UTF-8, hold no
    object with a key twice, and nest no deeper than MAX_DEPTH."""
    try:
        text = body.decode("utf-8")
        # A body that is one document and nothing after it, as clients send them, is
        # read without `decode`'s two searches for whitespace around it; any other
        # (whitespace about it, something after it, nothing valid) is `decode`'s.
        try:
            document, end = _DECODER.raw_decode(text)
        except _DuplicateKey:
            raise
        except ValueError:
            end = -1
        if end != len(text):
            document = _DECODER.decode(text)
    except _DuplicateKey as exc:
        raise InvalidJson("The JSON body has an object with a duplicate key.") from exc
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidJson() from exc
    # Every level of nesting opens with a bracket: a body of few cannot nest too deep.
    shallow = body.count(b"{") + body.count(b"[") <= MAX_DEPTH
    if not shallow or _SURROGATE_ESCAPE.search(body) is not None:
        _require_shallow_text(document)
    return document


def _require_shallow_text(document: Any) -> None:
    # Lone surrogates ("\ud800") are valid JSON escapes but no Unicode text: they
    # could be stored, then fail every later rendering of the object.
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _require_text(value)
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise InvalidJson(f"The JSON body nests deeper than {MAX_DEPTH} levels.")
            if isinstance(value, dict):
                for key in value:
                    _require_text(key)
                pending.extend((item, depth + 1) for item in value.values())
            else:
                pending.extend((item, depth + 1) for item in value)


def _require_text(value: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidJson("The JSON body holds a string that is not Unicode text.") from exc
