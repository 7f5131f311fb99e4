"""JSON responses rendered with orjson."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse

_CONTENT_TYPE = (b"content-type", b"application/json")


class JsonResponse(JSONResponse):
    """Subclasses JSONResponse so the OpenAPI generator documents bodies as JSON models.

    Every answer of the API is one: with no headers of its own, its head is made here
    as Starlette's `init_headers` makes it (the body's length, then the type), without
    that method's general case of given headers and media types."""

    def __init__(
        self,
        content: Any,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        background: BackgroundTask | None = None,
    ) -> None:
        if headers or media_type is not None or background is not None or status_code < 200:
            super().__init__(content, status_code, headers, media_type, background)
            return
        if status_code in (204, 304):
            super().__init__(content, status_code, headers, media_type, background)
            return
        self.status_code = status_code
        self.background = None
        body = self.body = orjson.dumps(content)
        self.raw_headers = [(b"content-length", str(len(body)).encode()), _CONTENT_TYPE]

    @classmethod
    def rendered(cls, body: bytes) -> JsonResponse:
        """An answer whose body is JSON already rendered, as `JsonResponse(content)` would
        answer with `content`."""
        response = cls.__new__(cls)
        response.status_code = 200
        response.background = None
        response.body = body
        response.raw_headers = [(b"content-length", str(len(body)).encode()), _CONTENT_TYPE]
        return response

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
