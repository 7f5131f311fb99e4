"""HTTP routes of the Verify API: parse, call one service method, render."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict
from starlette.responses import Response

from relay.accounts.models import Caller
from relay.errors import (
    AuthenticationFailed,
    ParameterInvalid,
    ParameterMissing,
    ResourceMissing,
)
from relay.ids import is_id
from relay.services import Services
from relay.verifications.models import Status, Verification
from relay.verifications.service import CreateRequest
from relay.verifications.store import ListQuery
from relay.web.callers import scope_caller
from relay.web.fields import require_locale, require_webhook_url
from relay.web.pagination import require_cursors
from relay.web.responses import JsonResponse
from relay.web.schemas import (
    E164_PATTERN,
    CheckVerificationBody,
    CreateVerificationBody,
    ErrorBody,
    VerificationList,
    VerificationObject,
)

_bearer = HTTPBearer(auto_error=False, description="A secret key: sk_test_… or sk_live_….")

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in [
        (400, "Invalid request"),
        (401, "Authentication failed"),
        (403, "HTTPS required"),
        (404, "No such object or route"),
        (405, "Method not allowed"),
        (409, "The verification is closed, or the idempotency key is in use"),
        (413, "Body larger than 64 KiB"),
        (415, "Body is not application/json"),
        (422, "Idempotency key reused with another request"),
        (429, "Rate or send limit reached; see Retry-After"),
        (500, "Internal error"),
        (503, "No SMS route for the destination"),
    ]
}

router = APIRouter(prefix="/v1", responses=ERRORS)


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


def services_of(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def services(request: Request) -> Services:
    # async on purpose: FastAPI runs a plain `def` dependency on a worker thread,
    # and that hop cost more than the rest of a retrieve (3.5 ms of 4.5 ms).
    return services_of(request)


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Caller:
    # The rate-limit middleware has usually authenticated this request already;
    # the answer is kept in the scope, so the key is looked up once per request.
    found = await scope_caller(request.scope, services_of(request).accounts)
    if found is None:
        raise AuthenticationFailed()
    return found


CallerDep = Annotated[Caller, Depends(caller)]
ServicesDep = Annotated[Services, Depends(services)]


def _render(verification: Verification, now: datetime) -> Response:
    return JsonResponse(verification.to_api(now))


def _verification_id(value: str) -> str:
    if not is_id(value, "ver"):
        raise ResourceMissing(f"No such verification: {value}", param="id")
    return value


_LINKS = {
    "RetrieveVerification": {
        "operationId": "retrieve_verification",
        "parameters": {"verification_id": "$response.body#/id"},
    },
    "CancelVerification": {
        "operationId": "cancel_verification",
        "parameters": {"verification_id": "$response.body#/id"},
    },
    "CheckVerification": {
        "operationId": "check_verification",
        "requestBody": {"id": "$response.body#/id", "code": "000000"},
    },
}


@router.post(
    "/verifications",
    response_model=VerificationObject,
    summary="Send a verification",
    operation_id="create_verification",
    responses={200: {"links": _LINKS}},
)
async def create_verification(
    body: CreateVerificationBody, who: CallerDep, app: ServicesDep
) -> Response:
    """Send a code to `to`. A second create for a number that has a pending
    verification resends the same code and returns the same verification."""
    return await create(app, who, body)


async def create(app: Services, who: Caller, body: CreateVerificationBody) -> Response:
    require_webhook_url(body.webhook_url, allowed=app.settings.webhook_allowed_networks)
    request = CreateRequest(
        to=body.to,
        locale=require_locale(body.locale),
        code_length=body.code_length,
        ttl=body.ttl,
        metadata=body.metadata,
        webhook_url=body.webhook_url,
    )
    verification = await app.verifications.create(who, request)
    return _render(verification, app.clock.now())


@router.post(
    "/verifications/check",
    response_model=VerificationObject,
    summary="Check a verification",
    operation_id="check_verification",
)
async def check_verification(
    body: CheckVerificationBody, who: CallerDep, app: ServicesDep
) -> Response:
    """Submit a code by verification `id`, or by `to` for that number's pending
    verification. At most 5 checks count."""
    return await check(app, who, body)


async def check(app: Services, who: Caller, body: CheckVerificationBody) -> Response:
    if (body.id is None) == (body.to is None):
        if body.id is None:
            raise ParameterMissing("Give either id or to.", param="id")
        raise ParameterInvalid("Give either id or to, not both.", param="to")
    verification_id = None if body.id is None else _verification_id(body.id)
    verification = await app.verifications.check(
        who, code=body.code, verification_id=verification_id, to=body.to
    )
    return _render(verification, app.clock.now())


@router.get(
    "/verifications/{verification_id}",
    response_model=VerificationObject,
    summary="Retrieve a verification",
    operation_id="retrieve_verification",
)
async def retrieve_verification(verification_id: str, who: CallerDep, app: ServicesDep) -> Response:
    return await retrieve(app, who, verification_id)


async def retrieve(app: Services, who: Caller, verification_id: str) -> Response:
    verification = await app.verifications.retrieve(who, _verification_id(verification_id))
    return _render(verification, app.clock.now())


@router.post(
    "/verifications/{verification_id}/cancel",
    response_model=VerificationObject,
    summary="Cancel a verification",
    operation_id="cancel_verification",
)
async def cancel_verification(
    verification_id: str, who: CallerDep, app: ServicesDep, body: CancelBody | None = None
) -> Response:
    """Close a pending verification. Cancelling a canceled one returns it unchanged."""
    verification = await app.verifications.cancel(who, _verification_id(verification_id))
    return _render(verification, app.clock.now())


@router.get(
    "/verifications",
    response_model=VerificationList,
    summary="List verifications",
    operation_id="list_verifications",
)
async def list_verifications(
    who: CallerDep,
    app: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    starting_after: Annotated[str | None, Query(description="Cursor: an object id")] = None,
    ending_before: Annotated[str | None, Query(description="Cursor: an object id")] = None,
    status: Status | None = None,
    to: Annotated[str | None, Query(pattern=E164_PATTERN)] = None,
    created_gte: Annotated[datetime | None, Query(alias="created[gte]")] = None,
    created_lt: Annotated[datetime | None, Query(alias="created[lt]")] = None,
) -> Response:
    """Newest first, keyset-paginated: pass the last id of a page as `starting_after`."""
    require_cursors(starting_after, ending_before, prefix="ver", noun="a verification id")
    query = ListQuery(
        limit=limit,
        starting_after=starting_after,
        ending_before=ending_before,
        status=status,
        to=to,
        created_gte=_aware(created_gte, "created[gte]"),
        created_lt=_aware(created_lt, "created[lt]"),
    )
    page, has_more = await app.verifications.list(who, query)
    now = app.clock.now()
    return JsonResponse(
        {
            "object": "list",
            "url": "/v1/verifications",
            "data": [verification.to_api(now) for verification in page],
            "has_more": has_more,
        }
    )


def _aware(moment: datetime | None, param: str) -> datetime | None:
    if moment is not None and moment.tzinfo is None:
        raise ParameterInvalid(f"{param} needs a time zone, such as Z.", param=param)
    return moment
