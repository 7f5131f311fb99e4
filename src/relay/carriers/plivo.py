"""Plivo's Message API as a carrier.

Sends with `POST /v1/Account/{auth_id}/Message/` (JSON, HTTP Basic with the
Auth ID and Auth Token), with `url` pointing at Relay's callback route, and
reads the form-encoded status callbacks Plivo posts back.

Plivo signs callbacks two ways, both HMAC-SHA256 under the Auth Token in
base64: V3 (`X-Plivo-Signature-V3`) covers the URL, every posted parameter
and a nonce; V2 (`X-Plivo-Signature-V2`, which Plivo's messaging pages
describe) covers only the URL without its query and the nonce. Relay takes
the versions `signature_versions` names (both by default) and prefers V3: a
callback that carries V3 is judged by V3 alone, since a body altered on the
way still passes V2. Neither scheme signs a time, so the nonce is what stops
a replay: a verified callback's nonce is taken once per carrier, and a second
callback with it within `signature_tolerance` is refused (decision 0043). A V3
callback whose own signed time (`DeliveryReportTime`, else the others) is
further than `signature_tolerance` from now is refused as stale; V2 signs no
body, so its times prove nothing and are not read for it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, get_args
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from relay.carriers.base import OutboundSms
from relay.carriers.callbacks import (
    MAX_NONCE,
    CallbackPayloadError,
    CallbackSignatureError,
    Nonce,
    StatusCallback,
    check_fresh,
    same_text,
)
from relay.carriers.http_carrier import (
    Accepted,
    Answer,
    FinalStates,
    ProviderRequest,
    Refused,
    SignedSettings,
    StatusUpdate,
)
from relay.carriers.json_fields import nonempty_text

__all__ = [
    "PlivoApi",
    "PlivoSettings",
    "SignatureVersion",
    "plivo_signature_v2",
    "plivo_signature_v3",
]

SignatureVersion = Literal["v3", "v2"]
# (signature, nonce) headers of each version, in the order they are preferred.
_HEADERS: dict[SignatureVersion, tuple[str, str]] = {
    "v3": ("x-plivo-signature-v3", "x-plivo-signature-v3-nonce"),
    "v2": ("x-plivo-signature-v2", "x-plivo-signature-v2-nonce"),
}
# The callback's own times, newest first; Plivo writes `2024-05-10 10:17:37.081458`.
_TIME_FIELDS = ("DeliveryReportTime", "SentTime", "QueuedTime", "MessageTime")
# `sent` may be the last word where operators return no receipt: it stays
# progress, and the carrier's receipt timeout decides.
_STATES = FinalStates(frozenset({"delivered"}), frozenset({"failed", "undelivered", "rejected"}))


@dataclass(frozen=True, kw_only=True)
class PlivoSettings(SignedSettings):
    """One Plivo account (or subaccount) bound as a Relay carrier."""

    auth_id: str
    auth_token: str = field(repr=False)
    sender: str
    # Which of Plivo's signatures a callback may carry; V3 is preferred when it comes.
    signature_versions: tuple[SignatureVersion, ...] = ("v3", "v2")
    signature_tolerance: float = 3600.0
    base_url: str = "https://api.plivo.com"

    def __post_init__(self) -> None:
        # A TOML array arrives as a list; anything else is left for checks() to name.
        if isinstance(self.signature_versions, list):
            object.__setattr__(self, "signature_versions", tuple(self.signature_versions))
        super().__post_init__()

    def checks(self) -> dict[str, bool]:
        versions: object = self.signature_versions
        known = get_args(SignatureVersion)
        listed = isinstance(versions, tuple) and all(version in known for version in versions)
        return {
            "auth_id must be letters and digits": self.auth_id.isalnum(),
            "auth_token must not be empty": bool(self.auth_token),
            "sender must not be empty": bool(self.sender),
            'signature_versions must list "v3", "v2" or both': listed
            and 0 < len(set(self.signature_versions)) == len(self.signature_versions),
            **super().checks(),
        }


class PlivoApi:
    """Plivo's Message resource and its signed status callbacks."""

    label = "plivo"
    headers: Mapping[str, str] = {}

    def __init__(self, settings: PlivoSettings) -> None:
        self._settings = settings
        self.auth: httpx.Auth | None = httpx.BasicAuth(settings.auth_id, settings.auth_token)

    def request(self, sms: OutboundSms) -> ProviderRequest:
        body = {
            "src": self._settings.sender,
            "dst": sms.to.removeprefix("+"),
            "text": sms.body,
            "url": self._settings.status_callback_url,
            "method": "POST",
        }
        return ProviderRequest(f"/v1/Account/{self._settings.auth_id}/Message/", json=body)

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            error = answer.body.get("error")
            text = nonempty_text(error) or answer.reason
            return Refused(f"plivo_http_{answer.status}", text)
        uuids = answer.body.get("message_uuid")
        first = nonempty_text(uuids[0] if isinstance(uuids, list) and uuids else None)
        if first is None:
            return Refused(
                "plivo_bad_response", "Plivo queued the SMS without a message_uuid", "unavailable"
            )
        return Accepted(first, None, "queued")

    def verify(self, callback: StatusCallback, *, now: datetime) -> Nonce:
        version = self._version(callback)
        header, nonce_header = _HEADERS[version]
        nonce = callback.header(nonce_header) or ""
        if not (0 < len(nonce) <= MAX_NONCE and nonce.isascii() and nonce.isprintable()):
            raise CallbackSignatureError(f"{nonce_header} is missing or not a nonce")
        token = self._settings.auth_token
        if version == "v3":
            expected = plivo_signature_v3(token, callback.url, callback.form(), nonce)
        else:
            expected = plivo_signature_v2(token, callback.url, nonce)
        # Plivo may list several signatures (one per token it knows), comma-separated.
        # Each is compared, a match or not, so timing says nothing of which one matched.
        given = (callback.header(header) or "").split(",")
        matches = [same_text(expected, candidate) for candidate in given]
        if not any(matches):
            raise CallbackSignatureError(f"{header} does not match this callback")
        signed_at = _signed_time(callback.form()) if version == "v3" else None
        if signed_at is not None:
            check_fresh(str(signed_at), now=now, tolerance=self._settings.signature_tolerance)
        return Nonce(nonce, self._settings.signature_tolerance)

    def _version(self, callback: StatusCallback) -> SignatureVersion:
        """The most preferred accepted version whose signature the callback carries."""
        accepted = self._settings.signature_versions
        for version, (header, _) in _HEADERS.items():
            if version in accepted and callback.header(header):
                return version
        names = " or ".join(_HEADERS[version][0] for version in accepted)
        raise CallbackSignatureError(f"the callback carries no {names}")

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        form = callback.form()
        message_id, status = form.get("MessageUUID"), form.get("Status")
        if not message_id or not status:
            raise CallbackPayloadError("status callback without MessageUUID or Status")
        error = form.get("ErrorCode", "")
        return [_STATES.update(message_id, status, f"plivo_{error}" if error.isdigit() else None)]


def plivo_signature_v2(auth_token: str, url: str, nonce: str) -> str:
    """Plivo's V2 signature: base64(HMAC-SHA256(token, URL without its query + nonce))."""
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    digest = hmac.new(auth_token.encode(), f"{base}{nonce}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def plivo_signature_v3(auth_token: str, url: str, params: Mapping[str, str], nonce: str) -> str:
    """Plivo's V3 signature of a POST: base64(HMAC-SHA256(token, signed text + "." + nonce)).

    The signed text is the URL without its query, `?`, the URL's query sorted as
    `k=v&k=v` (then `.` when there is one), and the posted parameters sorted as
    `kv` run together; with nothing posted, the `?` only comes with a query.
    """
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    query = "&".join(f"{k}={v}" for k, v in sorted(parse_qsl(parts.query, keep_blank_values=True)))
    if params:
        signed = f"{base}?{query}{'.' if query else ''}"
        signed += "".join(f"{key}{params[key]}" for key in sorted(params))
    else:
        signed = f"{base}?{query}" if query else base
    digest = hmac.new(auth_token.encode(), f"{signed}.{nonce}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _signed_time(form: Mapping[str, str]) -> float | None:
    for name in _TIME_FIELDS:
        value = form.get(name, "").strip()
        if not value:
            continue
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            continue
        # Unconfirmed whether Plivo writes an offset; without one, read as UTC.
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return None
