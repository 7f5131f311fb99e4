"""HTTP route of erasure: delete every row of the caller's account and mode that names
one destination (docs/privacy.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field
from starlette.responses import Response

from relay.erasure.models import Erasure
from relay.web.idempotency import answer, renders
from relay.web.operations import Call, Operation
from relay.web.responses import JsonResponse
from relay.web.schemas import Strict


class EraseBody(Strict):
    to: str = Field(
        description="The destination whose data is deleted: a phone number in E.164 form, "
        "or an email address (every spelling that reaches its mailbox: case, `+tag`).",
        min_length=1,
        max_length=254,
        examples=["+14155552671"],
    )


class ErasedCounts(BaseModel):
    verifications: int
    messages: int
    attempts: int
    events: int
    webhook_attempts: int
    idempotency_keys: int
    counters: int = Field(
        description="The per-number limits' counters and blocks whose subject was `to`."
    )


class ErasureObject(BaseModel):
    object: Literal["erasure"]
    livemode: bool
    to: str = Field(
        description="The destination, masked: `+1415…71`, `j…@example.com`.",
        examples=["+1415…71"],
    )
    deleted: ErasedCounts


def _render(erasure: Erasure, now: datetime) -> Response:
    return JsonResponse(erasure.to_api())


async def erase(call: Call) -> Response:
    body = call.body
    assert isinstance(body, EraseBody)
    who = call.who
    claim = renders(_render)
    erasure = await call.services.erasures.erase(
        body.to, account_id=who.account_id, livemode=who.livemode, claim=claim
    )
    return answer(claim, erasure, call.services.clock.now(), _render)


OPERATIONS = [
    Operation(
        "POST",
        "/v1/erasures",
        erase,
        "create_erasure",
        summary="Erase a destination",
        description="Delete every verification and message of this key's account and mode "
        "sent to `to`, with their attempts, events, webhook deliveries and stored "
        "idempotent answers, and the per-number limits' counts for it. A pending "
        "verification is deleted with its queued sends, which never leave. Figures "
        "(charts, `relay usage`) keep their counts, without the destination. Answers "
        "how many rows of each kind were deleted.",
        body=EraseBody,
        response=ErasureObject,
        tags=("erasures",),
    ),
]
