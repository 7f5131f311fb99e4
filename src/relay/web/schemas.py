"""Request and response shapes of the HTTP API; the OpenAPI document is built from them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=40)]
MetadataValue = Annotated[str, StringConstraints(max_length=500)]
Metadata = Annotated[dict[MetadataKey, MetadataValue], Field(max_length=20)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


E164_PATTERN = r"^\+[1-9][0-9]{6,14}$"


class CreateVerificationBody(Strict):
    to: str = Field(
        description="Destination phone number, E.164.",
        examples=["+14155552671"],
        pattern=E164_PATTERN,
    )
    webhook_url: Annotated[str, StringConstraints(max_length=2048)] | None = Field(
        None, description="HTTPS URL that receives this verification's events."
    )
    metadata: Metadata = Field(
        default_factory=dict, description="Up to 20 string values, echoed in objects and events."
    )
    code_length: int = Field(6, ge=4, le=10, description="Digits in the code.")
    ttl: int = Field(600, ge=60, le=3600, description="Seconds the code stays valid.")
    locale: Annotated[str, StringConstraints(min_length=2, max_length=35)] = Field(
        "en", description="BCP 47 tag choosing the SMS template (en, es, fr, de, pt)."
    )


class CheckVerificationBody(Strict):
    id: str | None = Field(None, description="The verification to check (`ver_…`).")
    to: str | None = Field(
        None,
        description="Or: the number whose pending verification to check.",
        pattern=E164_PATTERN,
    )
    code: Annotated[str, StringConstraints(min_length=1, max_length=20)] = Field(
        description="The code the user typed."
    )


class ErrorDetail(BaseModel):
    type: str
    code: str
    message: str
    param: str | None = None
    doc_url: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class AttemptObject(BaseModel):
    id: str
    object: Literal["attempt"]
    livemode: bool
    status: Literal["queued", "sent", "delivered", "failed"]
    carrier: str
    at: datetime
    error: ErrorDetail | None


class VerificationObject(BaseModel):
    id: str
    object: Literal["verification"]
    livemode: bool
    status: Literal["pending", "approved", "expired", "canceled", "max_attempts_reached"]
    to: str
    country: str
    sender: str
    locale: str
    code_length: int
    verified: bool
    remaining_checks: int
    attempts: list[AttemptObject]
    metadata: dict[str, str]
    webhook_url: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    approved_at: datetime | None
    canceled_at: datetime | None


class VerificationList(BaseModel):
    object: Literal["list"]
    url: str
    data: list[VerificationObject]
    has_more: bool


class Health(BaseModel):
    ok: bool
