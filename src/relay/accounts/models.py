"""Accounts, API keys and who is calling, pure."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

import phonenumbers

from relay.errors import InvalidRequest

Mode = Literal["test", "live"]
MODES: tuple[Mode, ...] = ("test", "live")
MAX_ACTIVE_KEYS_PER_MODE = 2
_KEY_SHAPE = re.compile(r"^sk_(test|live)_[A-Za-z0-9]{32}$")


def key_prefix(mode: Mode) -> str:
    return f"sk_{mode}_"


def key_mode(raw: str) -> Mode | None:
    """The mode a well-formed key claims, or None for anything malformed."""
    match = _KEY_SHAPE.match(raw)
    if match is None:
        return None
    return "live" if match.group(1) == "live" else "test"


@dataclass(frozen=True)
class Scope:
    """Whose data a request may touch: one account, one mode."""

    account_id: str
    livemode: bool

    def params(self) -> dict[str, Any]:
        """The scope as the bind parameters every scoped statement names."""
        return {"scope_account": self.account_id, "scope_livemode": self.livemode}


@dataclass(frozen=True)
class Caller:
    """An authenticated request: one account, in one mode, through one key."""

    account_id: str
    brand: str
    webotp_domain: str | None
    livemode: bool
    key_id: str
    # Destination countries the account may send to; None means every country.
    allowed_countries: frozenset[str] | None = None
    # The account has texts of its own (`relay.accounts.template_store`): a send loads them.
    has_templates: bool = False

    # Made once: the process keeps a key's caller (`accounts.key_cache`) and a request
    # asks for its scope several times.
    @functools.cached_property
    def scope(self) -> Scope:
        return Scope(account_id=self.account_id, livemode=self.livemode)


KeyState = Literal["active", "rolling", "expired", "revoked"]


@dataclass(frozen=True)
class ApiKey:
    """A key as the operator sees it: never its secret, only its last 4 characters."""

    id: str
    account_id: str
    livemode: bool
    last4: str
    created_at: datetime
    revoked_at: datetime | None
    # Set by a roll: the key answers until then ("rolling"), then never ("expired").
    expires_at: datetime | None = None
    # CIDR ranges the key answers from; None means anywhere.
    networks: tuple[str, ...] | None = None
    last_used_at: datetime | None = None
    last_refused_at: datetime | None = None
    last_refused_reason: str | None = None
    state: KeyState = "active"

    @property
    def mode(self) -> Mode:
        return "live" if self.livemode else "test"

    @property
    def redacted(self) -> str:
        return f"{key_prefix(self.mode)}…{self.last4}"


def key_state(revoked_at: datetime | None, expires_at: datetime | None, now: datetime) -> KeyState:
    if revoked_at is not None:
        return "revoked"
    if expires_at is None:
        return "active"
    return "rolling" if expires_at > now else "expired"


class NewKey(NamedTuple):
    """A created key and its secret, shown this once (only its hash is kept)."""

    key: ApiKey
    secret: str


class RolledKey(NamedTuple):
    """A roll: the new key with its secret (shown once) and the previous key, now rolling."""

    key: ApiKey
    secret: str
    previous: ApiKey


@dataclass(frozen=True)
class NewAccount:
    """Shown once, at creation: only hashes of the keys are kept."""

    id: str
    name: str
    test_key: str
    live_key: str
    # Test events and live events are signed with secrets of their own mode.
    test_webhook_secret: str
    live_webhook_secret: str


def parse_country_list(text: str) -> frozenset[str] | None:
    """`US,CA,FR` → those region codes; `all` → None (no restriction)."""
    if text.strip().lower() == "all":
        return None
    codes = frozenset(part.strip().upper() for part in text.split(",") if part.strip())
    unknown = sorted(codes - phonenumbers.SUPPORTED_REGIONS)
    if not codes or unknown:
        raise InvalidRequest(
            f"Give ISO 3166 country codes such as US,CA,FR, or all; unknown: {', '.join(unknown)}."
        )
    return codes


@dataclass(frozen=True)
class AccountRecord:
    """An account as the operator's commands show it."""

    id: str
    name: str
    brand: str
    webotp_domain: str | None
    created_at: datetime
    # ISO 3166 codes it may send to; None means all.
    allowed_countries: tuple[str, ...] | None
    # Seconds its verifications and messages are kept; None follows `delete_after`.
    delete_after: int | None = None


@dataclass(frozen=True)
class WebhookSecretAge:
    """A webhook signing secret in use, never its value."""

    id: str
    livemode: bool
    created_at: datetime
    # Set by a roll: the secret signs until then.
    expires_at: datetime | None
