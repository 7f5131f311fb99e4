"""Console sessions: a signed cookie, so every `relay serve` process reads the same session.

The cookie holds who signed in, until when, and the session's CSRF token, under
an HMAC keyed from the code key (and the admin token: changing it ends every
admin session). Nothing secret is in it: a key session names its key by id, and
the key is looked up again on every page, so a revoked key ends its sessions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

from relay.config import Settings

COOKIE = "relay_console"


@dataclass(frozen=True)
class Session:
    # "key": one account in one mode, through one API key; "admin": every account.
    kind: str
    account_id: str | None
    livemode: bool | None
    key_id: str | None
    expires: int
    csrf: str

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"


class Sessions:
    def __init__(self, settings: Settings) -> None:
        self.lifetime = settings.console_session_seconds
        material = b"relay-console-session\0" + (settings.admin_token or "").encode()
        self._key = hmac.new(settings.code_secret(), material, hashlib.sha256).digest()

    def issue(
        self,
        *,
        kind: str,
        now: float,
        account_id: str | None = None,
        livemode: bool | None = None,
        key_id: str | None = None,
    ) -> tuple[Session, str]:
        session = Session(
            kind=kind,
            account_id=account_id,
            livemode=livemode,
            key_id=key_id,
            expires=int(now) + self.lifetime,
            csrf=secrets.token_urlsafe(24),
        )
        fields: dict[str, Any] = {
            "k": kind,
            "a": account_id,
            "l": livemode,
            "i": key_id,
            "e": session.expires,
            "c": session.csrf,
        }
        body = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")
        return session, f"{body}.{self._mac(body)}"

    def read(self, cookie: str | None, *, now: float) -> Session | None:
        """The session the cookie carries, or None if it is absent, forged or over."""
        if not cookie or "." not in cookie:
            return None
        body, _, mac = cookie.partition(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            return None
        try:
            fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            session = Session(
                kind=str(fields["k"]),
                account_id=fields["a"],
                livemode=fields["l"],
                key_id=fields["i"],
                expires=int(fields["e"]),
                csrf=str(fields["c"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > now else None

    def _mac(self, body: str) -> str:
        digest = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def csrf_matches(session: Session, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(session.csrf.encode(), given.encode())
