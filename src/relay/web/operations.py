"""The route table's rows: one `Operation` per method and path, read by both the
router (`relay.web.dispatch`) and the OpenAPI document (`relay.web.openapi`), so
what is validated and what is documented come from the same models."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from starlette.responses import Response
from starlette.types import Scope

from relay.accounts.models import Caller
from relay.services import Services


@dataclass(slots=True)
class Call:
    """What a handler gets: the request, already decoded, authenticated and validated."""

    services: Services
    scope: Scope
    caller: Caller | None
    path: Mapping[str, str]
    body: Any
    query: Any
    raw_body: bytes

    @property
    def who(self) -> Caller:
        # Only operations with `authenticated=False` run without a caller.
        assert self.caller is not None
        return self.caller


Handler = Callable[[Call], Awaitable[Response]]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    handler: Handler
    operation_id: str
    summary: str = ""
    description: str = ""
    body: type[BaseModel] | None = None
    # An optional body may be left out entirely (an empty body).
    body_required: bool = True
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    links: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    authenticated: bool = True
    # Pages and carrier callbacks are served, not part of the API contract.
    in_schema: bool = True
    # The raw body is handed over unparsed (carrier callbacks post HTML forms).
    raw_body: bool = False
    # 200 by default; 204 answers have no body.
    status: int = 200
    media_type: str = "application/json"
