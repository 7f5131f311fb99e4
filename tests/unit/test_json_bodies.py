"""A request body is decoded as Python's json reads it, and refused for the same reasons:
not UTF-8, not JSON, a duplicate key, nesting past MAX_DEPTH, a lone surrogate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from relay.errors import InvalidJson
from relay.web.bodies import MAX_DEPTH, decode_json


def reference(body: bytes) -> Any:
    """What every body was checked against before bodies were checked by their bytes: the
    whole document walked for its depth and its strings."""

    def pairs(found: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(dict(found)) != len(found):
            raise ValueError("duplicate")
        return dict(found)

    document = json.loads(body.decode("utf-8"), object_pairs_hook=pairs)
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise ValueError("deep")
            items = [*value, *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return document


def outcome(decode: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "ok", json.dumps(decode(body), sort_keys=True)
    except (InvalidJson, ValueError, RecursionError):
        return "refused", None


texts = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF)) | st.sampled_from(
    ["\ud800", "x\udfff", "\ud83d\ude00", "\\ud800"]
)
documents = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=40,
)


def nested(depth: int) -> bytes:
    return b'{"k": ' * (depth - 1) + b"[1]" + b"}" * (depth - 1)


@settings(max_examples=500)
@given(documents, st.booleans())
def test_any_document_is_read_or_refused_as_walking_it_would(
    document: Any, ascii_only: bool
) -> None:
    # Written with its escapes (lone surrogates among them), or as UTF-8 as far as it goes.
    body = json.dumps(document, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert outcome(decode_json, body) == outcome(reference, body)


@given(st.binary(max_size=60))
@example(b'{"a": "\\ud800"}')
@example(b'{"\\uDBFF": 1}')
@example(b'["\\\\ud800"]')  # an escaped backslash, then text: no surrogate
@example(b'{"a": 1, "a": 2}')
@example(b"[NaN, Infinity]")
@example(b' {"a": 1}\r\n')  # whitespace about one document
@example(b'{"a": 1} x')  # something after it
@example(b'{"a": 1}{"a": 2}')
@example(b'{"a": 1, "a": 2} x')
def test_any_bytes_are_read_or_refused_as_walking_them_would(body: bytes) -> None:
    assert outcome(decode_json, body) == outcome(reference, body)


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 5])
def test_nesting_is_refused_past_max_depth_and_only_then(depth: int) -> None:
    assert outcome(decode_json, nested(depth)) == outcome(reference, nested(depth))
    assert (outcome(decode_json, nested(depth))[0] == "ok") == (depth <= MAX_DEPTH)


def test_brackets_inside_strings_only_cost_the_walk() -> None:
    body = json.dumps({"k": "[{" * 40}).encode()
    assert decode_json(body) == {"k": "[{" * 40}
