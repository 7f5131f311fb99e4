"""The known-keys gate: what it admits, how often it reads the valid keys, and its bound."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from relay.accounts.known_keys import KnownKeys
from relay.crypto import hash_api_key

VALID = hash_api_key("sk_test_" + "v" * 32)
NEW = hash_api_key("sk_test_" + "n" * 32)
GUESS = hash_api_key("sk_test_" + "g" * 32)


class Keys:
    """The database's valid keys, and how many times they were read."""

    def __init__(self, *hashes: str) -> None:
        self.hashes = list(hashes)
        self.reads = 0

    async def load(self) -> Iterable[str]:
        self.reads += 1
        await asyncio.sleep(0.01)
        return list(self.hashes)


@pytest.mark.asyncio
async def test_a_key_whose_record_this_process_keeps_is_known_without_a_read() -> None:
    keys = Keys()
    known = KnownKeys(keys.load, kept=lambda key_hash: key_hash == VALID)
    assert await known.knows(VALID)
    assert keys.reads == 0


@pytest.mark.asyncio
async def test_many_guesses_at_once_share_one_read() -> None:
    keys = Keys(VALID)
    known = KnownKeys(keys.load, refresh_every=0.2)
    answers = await asyncio.gather(*(known.knows(GUESS) for _ in range(200)))
    assert answers == [False] * 200
    assert keys.reads == 1
    assert await known.knows(VALID)
    assert keys.reads == 1


@pytest.mark.asyncio
async def test_reads_are_spaced_by_the_refresh_interval() -> None:
    keys = Keys(VALID)
    known = KnownKeys(keys.load, refresh_every=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(3):
        assert not await known.knows(GUESS)
    assert keys.reads == 3
    assert loop.time() - started >= 0.4


@pytest.mark.asyncio
async def test_a_key_made_a_moment_ago_is_found_by_a_read_begun_after_it_was_asked() -> None:
    keys = Keys(VALID)
    known = KnownKeys(keys.load, refresh_every=0.2)
    assert not await known.knows(GUESS)  # a read just now
    keys.hashes.append(NEW)
    assert await known.knows(NEW)  # waits for the next read rather than refusing
    assert keys.reads == 2


@pytest.mark.asyncio
async def test_a_forgotten_key_needs_a_read_that_no_longer_finds_it() -> None:
    keys = Keys(VALID)
    known = KnownKeys(keys.load, refresh_every=0.05)
    assert await known.knows(VALID)
    keys.hashes.remove(VALID)  # revoked
    known.forget(VALID)
    assert not await known.knows(VALID)
    assert keys.reads == 2


@pytest.mark.asyncio
async def test_a_failed_read_fails_its_callers_and_the_next_one_reads_again() -> None:
    attempts: list[int] = []

    async def load() -> Iterable[str]:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("database down")
        return [VALID]

    known = KnownKeys(load, refresh_every=0.05)
    with pytest.raises(ConnectionError):
        await known.knows(VALID)
    assert await known.knows(VALID)


@pytest.mark.asyncio
async def test_more_valid_keys_than_its_bound_open_the_gate() -> None:
    keys = Keys(*(hash_api_key(f"sk_test_{i:032d}") for i in range(5)))
    known = KnownKeys(keys.load, limit=4)
    assert await known.knows(GUESS)
    assert len(known) == 0
    assert await known.knows(hash_api_key("sk_test_" + "x" * 32))
    assert keys.reads == 1
