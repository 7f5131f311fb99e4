"""Console sessions: a row on the server, named by a signed cookie.

The cookie carries only a random session id and its HMAC, keyed from the code
key (and the admin token: changing it ends every session). The row
(`relay.console.sessions`) is found by the id's SHA-256 and says who signed in
and until when; every `relay serve` process reads the same row, so signing out
ends the session everywhere at once. The CSRF token is an HMAC of the id, so
it needs no column. A key session names its key by id, and the key is looked
up again on every page, so a revoked or rolled-out key ends its sessions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from relay.config import Settings
from relay.console import sessions as store
from relay.console.sessions import StoredSession
from relay.db.driver import Db

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
    # The SHA-256 of the session id: the row's name, never the id itself.
    id_hash: str = ""

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"


class Sessions:
    def __init__(self, settings: Settings, db: Db) -> None:
        self.lifetime = settings.console_session_seconds
        material = b"relay-console-session\0" + (settings.admin_token or "").encode()
        self._key = hmac.new(settings.code_secret(), material, hashlib.sha256).digest()
        self._db = db

    async def issue(
        self,
        *,
        kind: str,
        now: float,
        account_id: str | None = None,
        livemode: bool | None = None,
        key_id: str | None = None,
    ) -> tuple[Session, str]:
        """A new session, stored, and the cookie that names it."""
        session_id = secrets.token_urlsafe(32)
        stored = StoredSession(
            kind=kind,
            account_id=account_id,
            livemode=livemode,
            key_id=key_id,
            expires_at=_moment(int(now) + self.lifetime),
        )
        id_hash = _hash(session_id)
        await self._db.write(lambda tx: store.insert(tx, id_hash, stored, now=_moment(now)))
        return self._session(session_id, stored), f"{session_id}.{self._mac(session_id)}"

    async def read(self, cookie: str | None, *, now: float) -> Session | None:
        """The session the cookie names, or None if it is absent, forged, ended or over."""
        session_id = self._verified(cookie)
        if session_id is None:
            return None
        id_hash = _hash(session_id)
        stored = await self._db.read(lambda tx: store.live(tx, id_hash, now=_moment(now)))
        return None if stored is None else self._session(session_id, stored)

    async def end(self, session: Session, *, now: float) -> None:
        """Refused from now on, by every process."""
        await self._db.write(lambda tx: store.end(tx, session.id_hash, now=_moment(now)))

    def _verified(self, cookie: str | None) -> str | None:
        if not cookie or "." not in cookie:
            return None
        session_id, _, mac = cookie.partition(".")
        if not session_id or not hmac.compare_digest(mac.encode(), self._mac(session_id).encode()):
            return None
        return session_id

    def _session(self, session_id: str, stored: StoredSession) -> Session:
        return Session(
            kind=stored.kind,
            account_id=stored.account_id,
            livemode=stored.livemode,
            key_id=stored.key_id,
            expires=int(stored.expires_at.timestamp()),
            csrf=self._mac("csrf\0" + session_id),
            id_hash=_hash(session_id),
        )

    def _mac(self, body: str) -> str:
        digest = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def csrf_matches(session: Session, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(session.csrf.encode(), given.encode())
