"""The kept key records: used only while changes are heard, dropped at each one, bounded,
and never refilled by a read that began before a drop."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from relay.accounts.access import FoundKey
from relay.accounts.key_cache import KeyCache
from relay.accounts.models import Caller

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class Heard:
    """A stand-in for `relay.db.changes.Changes`: whether changes are heard, and a way to
    tell of one."""

    def __init__(self) -> None:
        self.up = True
        self.asked = 0
        self._callbacks: list[Callable[[], None]] = []

    def on_change(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def change(self) -> None:
        for callback in self._callbacks:
            callback()

    async def start(self) -> bool:
        return self.up

    def fresh(self) -> bool:
        self.asked += 1
        return self.up

    async def settled(self, generation: int) -> None:
        return None

    async def close(self) -> None:
        return None


def record(
    key_id: str = "key_1",
    *,
    revoked_at: datetime | None = None,
    expires_at: datetime | None = None,
) -> FoundKey:
    caller = Caller("acct_1", "Acme", None, livemode=False, key_id=key_id)
    return FoundKey(caller, revoked_at, expires_at, None)


def test_a_kept_record_is_found_while_changes_are_heard() -> None:
    heard = Heard()
    cache = KeyCache(heard)
    cache.keep("h1", record(), cache.epoch)
    assert cache.get("h1") == record()
    assert cache.get("h2") is None


def test_nothing_kept_is_used_while_changes_are_not_heard() -> None:
    heard = Heard()
    cache = KeyCache(heard)
    cache.keep("h1", record(), cache.epoch)
    heard.up = False
    assert cache.get("h1") is None
    heard.up = True
    assert cache.get("h1") == record()


def test_a_change_drops_every_kept_record() -> None:
    heard = Heard()
    cache = KeyCache(heard)
    for n in range(3):
        cache.keep(f"h{n}", record(f"key_{n}"), cache.epoch)
    heard.change()
    assert len(cache) == 0
    assert cache.get("h0") is None


def test_a_read_begun_before_a_change_is_not_kept() -> None:
    heard = Heard()
    cache = KeyCache(heard)
    began = cache.epoch
    heard.change()  # committed while the read was on its way
    cache.keep("h1", record(), began)
    assert cache.get("h1") is None


def test_past_its_bound_the_least_recently_used_record_goes() -> None:
    cache = KeyCache(Heard(), limit=2)
    cache.keep("h1", record("key_1"), cache.epoch)
    cache.keep("h2", record("key_2"), cache.epoch)
    assert cache.get("h1") is not None  # h2 is now the least recently used
    cache.keep("h3", record("key_3"), cache.epoch)
    assert len(cache) == 2
    assert cache.get("h2") is None
    assert cache.get("h1") is not None
    assert cache.get("h3") is not None


def test_only_a_record_valid_now_makes_its_key_known_to_the_gate() -> None:
    cache = KeyCache(Heard())
    cache.keep("active", record(), cache.epoch)
    cache.keep("revoked", record(revoked_at=NOW - timedelta(days=1)), cache.epoch)
    cache.keep("rolling", record(expires_at=NOW + timedelta(seconds=1)), cache.epoch)
    cache.keep("expired", record(expires_at=NOW), cache.epoch)
    known = [
        h for h in ("active", "revoked", "rolling", "expired", "never") if cache.holds_valid(h, NOW)
    ]
    assert known == ["active", "rolling"]
