"""Request and response shapes of the HTTP API; the OpenAPI document is built from them."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from relay.verifications.models import Status

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=40)]
MetadataValue = Annotated[str, StringConstraints(max_length=500)]
Metadata = Annotated[dict[MetadataKey, MetadataValue], Field(max_length=20)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


E164_PATTERN = r"^\+[1-9][0-9]{6,14}$"
# What `relay.webhooks.guard.url_problem` accepts, as far as a pattern can say it:
# https, a host, no user name or password, no whitespace or backslash. Private and
# reserved IP literals are refused too, which the description states.
WEBHOOK_URL_PATTERN = r"^https://[^\s/?#@\\]+(?:[/?#][^\s\\]*)?$"
WebhookUrl = Annotated[str, StringConstraints(max_length=2048)]


# A BCP 47 language tag (`pt-BR`, `zh-Hant`, `fr_CA`); the server also checks that
# it is language, optional script, optional region (`relay.sms.locales`).
LOCALE_PATTERN = r"^[A-Za-z]{2,3}([-_][0-9A-Za-z]{1,8})*$"
Locale = Annotated[str, StringConstraints(min_length=2, max_length=35)]


def locale_field() -> Any:
    return Field(
        None,
        description="BCP 47 tag choosing the SMS template (en, pt-BR, zh-Hant): the most "
        "specific template that exists is used, falling back from region to language to "
        "en; a language without a template gets en. Absent: the language of the "
        "destination's country (+33 gets fr, +81 ja), en where none fits. The locale "
        "used is echoed in `locale`.",
        json_schema_extra={"pattern": LOCALE_PATTERN},
    )


def id_pattern(*prefixes: str) -> str:
    """Relay's ids: a prefix, `_`, and 26 Crockford base32 characters (`relay.ids`)."""
    return f"^({'|'.join(prefixes)})_[0-9A-HJKMNP-TV-Z]{{26}}$"


def webhook_url_field(what: str) -> Any:
    return Field(
        None,
        description=(
            f"HTTPS URL that receives {what} events: at most 2048 characters, no user "
            "name or password; its host a valid DNS name (IDNA 2008) or an IP literal, "
            "neither a private or reserved address."
        ),
        json_schema_extra={"pattern": WEBHOOK_URL_PATTERN},
    )


ChannelName = Literal["sms", "whatsapp", "email"]
# `to` as the create accepts it: E.164 for sms and whatsapp, an email address for email.
ChannelList = Annotated[
    list[ChannelName], Field(min_length=1, max_length=3, json_schema_extra={"uniqueItems": True})
]
# The length is the server's check, not pydantic's: an overlong number is still
# `phone_number_invalid`, an overlong address `parameter_invalid`.
DESTINATION_SCHEMA: dict[str, Any] = {
    "maxLength": 254,
    "anyOf": [{"pattern": E164_PATTERN}, {"format": "email"}],
}


class CreateVerificationBody(Strict):
    """At most one of `channel` and `channels`; neither: SMS."""

    to: str = Field(
        description="Destination: a phone number in E.164 for sms and whatsapp, an email "
        "address (at most 254 characters, domain required) for email. An email goes to the "
        "address as given; limits count its mailbox (case, +tag and domain form aside).",
        examples=["+14155552671"],
        json_schema_extra=DESTINATION_SCHEMA,
    )
    channel: ChannelName | None = Field(
        None, description="The channel to send the code on: sms (the default), whatsapp or email."
    )
    channels: ChannelList | None = Field(
        None,
        description="Or: channels to try in order, each once; the next is tried when an "
        "attempt on the current one fails, within the TTL, with the same code. email cannot "
        "be combined with sms or whatsapp (one destination per verification).",
    )
    webhook_url: WebhookUrl | None = webhook_url_field("this verification's")
    metadata: Metadata = Field(
        default_factory=dict, description="Up to 20 string values, echoed in objects and events."
    )
    code_length: int = Field(6, ge=4, le=10, description="Digits in the code.")
    ttl: int = Field(600, ge=60, le=3600, description="Seconds the code stays valid.")
    locale: Locale | None = locale_field()


class CheckVerificationBody(Strict):
    """Exactly one of `id` and `to`."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["id"],
                    "properties": {"id": {"type": "string"}, "to": {"type": "null"}},
                },
                {
                    "required": ["to"],
                    "properties": {"to": {"type": "string"}, "id": {"type": "null"}},
                },
            ]
        },
    )

    id: str | None = Field(None, description="The verification to check (`ver_…`).")
    to: str | None = Field(
        None,
        description="Or: the destination (phone number or email address) whose pending "
        "verification to check; any spelling of an address finds its mailbox's.",
        json_schema_extra=DESTINATION_SCHEMA,
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


class AttemptError(ErrorDetail):
    """Why a carrier refused or could not deliver; `carrier_code` is the carrier's own code."""

    carrier_code: str | None = None


class AttemptObject(BaseModel):
    id: str
    object: Literal["attempt"]
    livemode: bool
    status: Literal["queued", "sent", "delivered", "failed"]
    channel: ChannelName
    carrier: str
    at: datetime
    error: AttemptError | None


class VerificationObject(BaseModel):
    id: str
    object: Literal["verification"]
    livemode: bool
    status: Literal["pending", "approved", "expired", "canceled", "max_attempts_reached"]
    to: str
    channel: ChannelName = Field(description="The channel of its latest attempt.")
    country: str | None = Field(description="ISO 3166 country of a phone number; null for email.")
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


class SendMessageBody(Strict):
    to: str = Field(
        description="Destination phone number, E.164.",
        examples=["+14155552671"],
        pattern=E164_PATTERN,
    )
    code: str = Field(
        description="The code to deliver, generated by you: 4-10 letters or digits.",
        pattern=r"^[0-9A-Za-z]{4,10}$",
        examples=["482913"],
    )
    webhook_url: WebhookUrl | None = webhook_url_field("this message's")
    metadata: Metadata = Field(
        default_factory=dict, description="Up to 20 string values, echoed in objects and events."
    )
    locale: Locale | None = locale_field()


class MessageObject(BaseModel):
    id: str
    object: Literal["message"]
    livemode: bool
    status: Literal["queued", "sent", "delivered", "failed"]
    to: str
    country: str
    sender: str
    locale: str
    attempts: list[AttemptObject]
    metadata: dict[str, str]
    webhook_url: str | None
    created_at: datetime
    updated_at: datetime


class Health(BaseModel):
    ok: bool


class CancelBody(Strict):
    """Optional, and empty: cancel takes no fields."""


class Query(BaseModel):
    # Lax: query values arrive as text, so "10" is a limit and "2024-05-01T12:00:00Z" a time.
    model_config = ConfigDict(extra="forbid")


_DATE_TIME_START = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]")


def _date_time_text(value: object) -> object:
    """Lax parsing would read "0.5" as seconds since 1970; the document promises a date-time."""
    if isinstance(value, str) and not _DATE_TIME_START.match(value):
        raise ValueError("must be an ISO 8601 date-time with a time zone")
    return value


# A date-time with a time zone, written as text (never a number of seconds).
QueryTime = Annotated[AwareDatetime, BeforeValidator(_date_time_text)]


class VerificationListQuery(Query):
    limit: int = Field(10, ge=1, le=100, description="Page size.")
    starting_after: str | None = Field(
        None,
        description="Cursor: a verification id. Not with ending_before.",
        pattern=id_pattern("ver"),
    )
    ending_before: str | None = Field(
        None,
        description="Cursor: a verification id. Not with starting_after.",
        pattern=id_pattern("ver"),
    )
    status: Status | None = Field(None, description="Only verifications in this status.")
    to: str | None = Field(
        None,
        description="Only verifications sent to this destination: a number in E.164, or an "
        "email address (every spelling of its mailbox).",
        json_schema_extra=DESTINATION_SCHEMA,
    )
    created_gte: QueryTime | None = Field(
        None, alias="created[gte]", description="Created at or after, with a time zone."
    )
    created_lt: QueryTime | None = Field(
        None, alias="created[lt]", description="Created before, with a time zone."
    )
