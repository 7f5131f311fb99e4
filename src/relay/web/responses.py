"""JSON responses rendered with orjson."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse


class JsonResponse(JSONResponse):
    """Subclasses JSONResponse so the OpenAPI generator documents bodies as JSON models."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
