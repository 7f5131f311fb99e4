"""Meta's WhatsApp webhooks: the signature, the statuses they carry, the subscription handshake.

As Meta documents them:

- https://developers.facebook.com/docs/graph-api/webhooks/getting-started
  (the `GET` verification request with `hub.mode=subscribe`, `hub.verify_token`
  and `hub.challenge`, answered with the challenge; every notification signed
  in `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body under the
  app secret>`; a notification not acknowledged is retried for up to 7 days);
- https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples
  and .../webhooks/reference/messages/status (`entry[].changes[].value` with
  `metadata.phone_number_id` and `statuses[]` of `id`, `status` (`sent`,
  `delivered`, `read`, `failed`), `timestamp`, `recipient_id`, `errors[]`).

One app posts the webhooks of all its numbers to one URL, incoming messages
included: a carrier reads only the statuses of its own phone number.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Mapping
from typing import Any

from relay.carriers.callbacks import (
    CallbackPayloadError,
    CallbackSignatureError,
    StatusCallback,
    same_text,
)
from relay.carriers.http_carrier import FinalStates, StatusUpdate
from relay.carriers.json_fields import nonempty_text, whole_number

__all__ = ["check_signature", "handshake_challenge", "read_statuses", "signature"]

_SIGNATURE_HEADER = "x-hub-signature-256"
# `read` comes after `delivered` (or alone, when the delivered webhook was lost);
# `sent` only says Meta took it.
_STATES = FinalStates(frozenset({"delivered", "read"}), frozenset({"failed"}))
# Meta's challenge is a number; anything long or unprintable is not one.
_MAX_CHALLENGE = 128


def signature(body: bytes, app_secret: str) -> str:
    """The `X-Hub-Signature-256` value Meta sends with `body`."""
    digest = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def check_signature(callback: StatusCallback, app_secret: str) -> None:
    """Refuse a webhook the app secret did not sign, compared in constant time."""
    given = callback.header(_SIGNATURE_HEADER)
    if not same_text(signature(callback.body, app_secret), given and given.lower()):
        raise CallbackSignatureError("X-Hub-Signature-256 does not match")


def handshake_challenge(query: Mapping[str, str], verify_token: str) -> str:
    """The challenge to answer Meta's subscription check with, once it names our token."""
    mode_ok = query.get("hub.mode") == "subscribe"
    # Both checks run, so the answer's timing does not say which one failed.
    token_ok = same_text(verify_token, query.get("hub.verify_token"))
    if not (mode_ok and token_ok):
        raise CallbackSignatureError("hub.verify_token does not match")
    challenge = query.get("hub.challenge") or ""
    if not (0 < len(challenge) <= _MAX_CHALLENGE and challenge.isascii()) or not (
        challenge.isprintable()
    ):
        raise CallbackPayloadError("hub.challenge is missing or not a challenge")
    return challenge


def read_statuses(callback: StatusCallback, *, phone_number_id: str) -> list[StatusUpdate]:
    """The final statuses a signed webhook reports of this number's messages."""
    document = callback.json()
    entries = document.get("entry")
    if not isinstance(entries, list):
        raise CallbackPayloadError("webhook without entry")
    if document.get("object") != "whatsapp_business_account":
        return []
    return [
        _STATES.update(message_id, nonempty_text(status.get("status")), _error_code(status))
        for value in _values(entries)
        if _number_of(value) in {None, phone_number_id}
        for status in _dicts(value.get("statuses"))
        for message_id in [nonempty_text(status.get("id"))]
        if message_id is not None
    ]


def _values(entries: list[Any]) -> Iterator[Mapping[str, Any]]:
    for entry in _dicts(entries):
        for change in _dicts(entry.get("changes")):
            value = change.get("value")
            if isinstance(value, dict):
                yield value


def _number_of(value: Mapping[str, Any]) -> str | None:
    metadata = value.get("metadata")
    return nonempty_text(metadata.get("phone_number_id")) if isinstance(metadata, dict) else None


def _dicts(items: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, dict))


def _error_code(status: Mapping[str, Any]) -> str | None:
    errors = list(_dicts(status.get("errors")))
    code = whole_number(errors[0].get("code")) if errors else None
    return None if code is None else f"whatsapp_{code}"
