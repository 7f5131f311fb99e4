"""An answer made by `JsonResponse` is, head and body, what Starlette's own JSONResponse
makes of the same content rendered by orjson, whatever status and headers it is given."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import JSONResponse

from relay.web.idempotency import stored
from relay.web.responses import JsonResponse


class StarlettesOwn(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


@pytest.mark.parametrize(
    "arguments",
    [
        ({"id": "ver_1", "attempts": [{"at": "2026-11-28T12:00:00.000Z"}]},),
        ({"error": {"code": "resource_missing"}}, 404),
        ({}, 200, {}),
        ({"error": {}}, 429, {"Retry-After": "3"}),
        ({"error": {}}, 401, {"WWW-Authenticate": "Bearer"}),
        (None, 204),
        ({"ok": True}, 200, None, "application/problem+json"),
    ],
)
def test_an_answer_is_made_as_starlette_makes_it(arguments: tuple[Any, ...]) -> None:
    made, own = JsonResponse(*arguments), StarlettesOwn(*arguments)
    assert made.status_code == own.status_code
    assert made.raw_headers == own.raw_headers
    assert made.body == own.body
    assert made.background is own.background is None
    assert made.headers["content-type"] == own.headers["content-type"]


def test_an_answer_kept_with_its_key_has_its_headers_as_text() -> None:
    first = stored(JsonResponse({"id": "ver_1"}))
    again = stored(JsonResponse({"id": "ver_2"}))
    assert first.headers == (("content-length", "14"), ("content-type", "application/json"))
    assert again.headers == first.headers
    assert first.body == b'{"id":"ver_1"}'
    refused = stored(JsonResponse({"error": {}}, 429, {"Retry-After": "3"}))
    assert refused.status == 429
    assert refused.headers[0] == ("retry-after", "3")
