"""Idempotency keys, pure: what a stored key means for a new request, given `now`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from relay.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from relay.records import fast_init

KEEP = timedelta(hours=24)
MAX_KEY_LENGTH = 255


class KeyStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    DONE = "done"


@fast_init
@dataclass(frozen=True)
class StoredResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


@fast_init
@dataclass(frozen=True)
class KeyRecord:
    request_hash: str
    status: KeyStatus
    locked_until: datetime
    created_at: datetime
    response: StoredResponse | None
    # Set by a key taken with its request's change (see `relay.idempotency.claims`).
    resource_path: str | None = None


@fast_init
@dataclass(frozen=True)
class Replay:
    response: StoredResponse


@fast_init
@dataclass(frozen=True)
class Recover:
    """The holder's change committed with the key, but it died before storing its answer:
    answer with the changed resource as it stands now; never run the request again."""

    resource_path: str
    # The dead holder's lease, the token the stored answer replaces.
    locked_until: datetime


def key_is_valid(key: str) -> bool:
    # Printable ASCII (" " to "~"), by two C calls rather than one comparison per letter.
    return 0 < len(key) <= MAX_KEY_LENGTH and key.isascii() and key.isprintable()


def fingerprint(method: str, path: str, query: bytes, body: bytes) -> str:
    """Same method, path and body bytes: the same request."""
    verb, where = method.encode(), path.encode()
    # Each part after its length, hashed in one call.
    return hashlib.sha256(
        b"".join(
            (
                len(verb).to_bytes(8, "big"),
                verb,
                len(where).to_bytes(8, "big"),
                where,
                len(query).to_bytes(8, "big"),
                query,
                len(body).to_bytes(8, "big"),
                body,
            )
        )
    ).hexdigest()


def is_storable(status: int) -> bool:
    """Only answers of requests that ran: 400, 401 and 429 never ran, a 5xx may not have
    finished, so a retry under the same key must get to run."""
    return status < 500 and status not in (400, 401, 429)


def is_stale(record: KeyRecord, *, now: datetime) -> bool:
    """Kept 24 h: after that a key is free again, whether or not the prune ran."""
    return record.created_at <= now - KEEP


def decide(record: KeyRecord, *, request_hash: str, now: datetime) -> Replay | Recover:
    """For a live record another request made (or this one's first try): the replay, or
    the resource its dead holder changed. Raises IdempotencyKeyReused for another request
    under the key, IdempotencyKeyInUse while its holder's lease runs."""
    if record.request_hash != request_hash:
        raise IdempotencyKeyReused(param="Idempotency-Key")
    if record.status is KeyStatus.DONE and record.response is not None:
        return Replay(record.response)
    if record.locked_until > now or record.resource_path is None:
        raise IdempotencyKeyInUse(param="Idempotency-Key")
    return Recover(record.resource_path, record.locked_until)
