"""What each endpoint sends, as data: the sync and async clients only transport it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote


@dataclass(frozen=True)
class Call:
    method: Literal["GET", "POST"]
    path: str
    body: Mapping[str, Any] | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None


def _given(**fields: Any) -> dict[str, Any]:
    # Omitted, not null: Relay then applies its documented defaults.
    return {name: value for name, value in fields.items() if value is not None}


def _segment(object_id: str) -> str:
    # An id is opaque to the client; quoting keeps it one path segment whatever it holds.
    return quote(object_id, safe="")


def _query(**fields: Any) -> dict[str, str]:
    return {name: _query_value(value) for name, value in _given(**fields).items()}


def _query_value(value: Any) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("created_gte / created_lt need a timezone-aware datetime")
        return value.isoformat()
    return str(value)


def create_verification(
    to: str,
    *,
    channel: str | None = None,
    channels: Sequence[str] | None = None,
    webhook_url: str | None,
    metadata: Mapping[str, str] | None,
    code_length: int | None,
    ttl: int | None,
    locale: str | None,
    idempotency_key: str | None,
) -> Call:
    body = _given(
        to=to,
        channel=channel,
        channels=None if channels is None else list(channels),
        webhook_url=webhook_url,
        metadata=metadata,
        code_length=code_length,
        ttl=ttl,
        locale=locale,
    )
    return Call("POST", "/v1/verifications", body, idempotency_key=idempotency_key)


def check_verification(
    code: str, *, id: str | None, to: str | None, idempotency_key: str | None
) -> Call:
    if (id is None) == (to is None):
        raise ValueError("check needs exactly one of id= and to=")
    body = _given(id=id, to=to, code=code)
    return Call("POST", "/v1/verifications/check", body, idempotency_key=idempotency_key)


def retrieve_verification(id: str) -> Call:
    return Call("GET", f"/v1/verifications/{_segment(id)}")


def cancel_verification(id: str, *, idempotency_key: str | None) -> Call:
    path = f"/v1/verifications/{_segment(id)}/cancel"
    return Call("POST", path, {}, idempotency_key=idempotency_key)


def list_verifications(
    *,
    limit: int | None,
    status: str | None,
    to: str | None,
    created_gte: datetime | str | None,
    created_lt: datetime | str | None,
    starting_after: str | None,
    ending_before: str | None,
) -> Call:
    params = _query(
        limit=limit,
        status=status,
        to=to,
        starting_after=starting_after,
        ending_before=ending_before,
    )
    params |= {
        f"created[{bound}]": _query_value(value)
        for bound, value in (("gte", created_gte), ("lt", created_lt))
        if value is not None
    }
    return Call("GET", "/v1/verifications", params=params)


def send_message(
    to: str,
    *,
    code: str,
    webhook_url: str | None,
    metadata: Mapping[str, str] | None,
    locale: str | None,
    idempotency_key: str | None,
) -> Call:
    body = _given(to=to, code=code, webhook_url=webhook_url, metadata=metadata, locale=locale)
    return Call("POST", "/v1/messages", body, idempotency_key=idempotency_key)


def retrieve_message(id: str) -> Call:
    return Call("GET", f"/v1/messages/{_segment(id)}")


def retrieve_event(id: str) -> Call:
    return Call("GET", f"/v1/events/{_segment(id)}")


def list_events(
    *,
    related: str | None,
    type: str | None,
    delivery_status: str | None,
    limit: int | None,
    starting_after: str | None,
    ending_before: str | None,
) -> Call:
    params = _query(
        related=related,
        type=type,
        delivery_status=delivery_status,
        limit=limit,
        starting_after=starting_after,
        ending_before=ending_before,
    )
    return Call("GET", "/v1/events", params=params)


def create_erasure(to: str, *, idempotency_key: str | None) -> Call:
    return Call("POST", "/v1/erasures", {"to": to}, idempotency_key=idempotency_key)


def next_page(call: Call, page: Mapping[str, Any]) -> Call | None:
    """The call for the page after `page`, or None at the end.

    Lists are newest first. Paging forward (the default) continues after the
    oldest item seen; a list started with `ending_before` pages toward newer
    items, before the newest seen.
    """
    data = page.get("data") or []
    if not page.get("has_more") or not data:
        return None
    if "ending_before" in call.params:
        cursor = {"ending_before": str(data[0]["id"])}
    else:
        cursor = {"starting_after": str(data[-1]["id"])}
    return replace(call, params={**call.params, **cursor})
