"""The abuse rules as pure functions: counts and `now` in, decisions out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from relay.abuse.models import (
    BUCKET,
    DAY,
    HOUR,
    Kind,
    Rules,
    bucket_of,
    country_allowed,
    looks_like_pumping,
    prefix_of,
    redacted_prefix,
    step_of,
    wait_for_buckets,
    wait_for_times,
    window_start,
)
from relay.idempotency.models import fingerprint, is_storable, key_is_valid

NOW = datetime(2026, 11, 21, 10, 7, 30, tzinfo=UTC)


def test_buckets_are_five_minute_steps_and_a_window_counts_whole_buckets() -> None:
    assert bucket_of(NOW) == datetime(2026, 11, 21, 10, 5, tzinfo=UTC)
    assert window_start(NOW, HOUR) == datetime(2026, 11, 21, 9, 10, tzinfo=UTC)


def test_the_account_is_counted_in_clock_hours_and_everything_else_in_five_minutes() -> None:
    assert step_of(Kind.ACCOUNT) == HOUR
    assert {step_of(kind) for kind in Kind if kind is not Kind.ACCOUNT} == {BUCKET}
    assert bucket_of(NOW, HOUR) == datetime(2026, 11, 21, 10, tzinfo=UTC)
    # The account's day: this clock hour and the 23 before it.
    assert window_start(NOW, DAY, HOUR) == datetime(2026, 11, 20, 11, tzinfo=UTC)
    assert (bucket_of(NOW) - window_start(NOW, HOUR)) // BUCKET == 11


def test_under_the_cap_there_is_nothing_to_wait_for() -> None:
    counts = [(bucket_of(NOW), 2)]
    assert wait_for_buckets(counts, cap=3, length=DAY, now=NOW) is None


def test_at_the_cap_the_wait_ends_when_the_oldest_bucket_leaves_the_window() -> None:
    oldest = bucket_of(NOW) - timedelta(hours=3)
    counts = [(bucket_of(NOW), 1), (oldest, 2)]
    wait = wait_for_buckets(counts, cap=3, length=DAY, now=NOW)
    assert wait == int((oldest + DAY - NOW).total_seconds())


def test_the_wait_skips_as_many_buckets_as_it_takes_to_fit_one_more() -> None:
    first, second = bucket_of(NOW) - 2 * BUCKET, bucket_of(NOW) - BUCKET
    counts = [(first, 1), (second, 5), (bucket_of(NOW), 1)]
    assert wait_for_buckets(counts, cap=4, length=HOUR, now=NOW) == int(
        (second + HOUR - NOW).total_seconds()
    )


def test_exact_times_wait_for_the_one_that_makes_room() -> None:
    times = [NOW - timedelta(minutes=50), NOW - timedelta(minutes=20), NOW - timedelta(minutes=5)]
    assert wait_for_times(times, cap=4, length=HOUR, now=NOW) is None
    assert wait_for_times(times, cap=2, length=HOUR, now=NOW) == 40 * 60
    assert wait_for_times(times, cap=3, length=HOUR, now=NOW) == 10 * 60


@pytest.mark.parametrize(
    ("sends", "approvals", "pumping"),
    [(29, 0, False), (30, 0, True), (30, 2, True), (30, 3, False), (300, 29, True)],
)
def test_pumping_is_many_sends_with_almost_no_approvals(
    sends: int, approvals: int, pumping: bool
) -> None:
    assert looks_like_pumping(sends, approvals, min_sends=30, min_conversion=0.1) is pumping


def test_test_keys_get_relaxed_per_number_caps() -> None:
    rules = Rules(test_mode_factor=10)
    assert rules.per_number(10, livemode=True) == 10
    assert rules.per_number(10, livemode=False) == 100


def test_a_prefix_is_the_number_without_its_last_four_digits_and_logs_shorter() -> None:
    assert prefix_of("+14155552671") == "+1415555"
    assert redacted_prefix("+1415555") == "+1415…"


def test_no_allow_list_allows_every_country() -> None:
    assert country_allowed("FR", None)
    assert country_allowed("FR", frozenset({"FR", "US"}))
    assert not country_allowed("GB", frozenset({"FR", "US"}))


@pytest.mark.parametrize(
    ("key", "valid"),
    [("a", True), ("x" * 255, True), ("x" * 256, False), ("", False), ("tab\there", False)],
)
def test_idempotency_keys_are_1_to_255_printable_ascii(key: str, valid: bool) -> None:
    assert key_is_valid(key) is valid


def test_an_idempotency_key_takes_exactly_the_letters_from_space_to_tilde() -> None:
    taken = [code for code in range(0x3000) if key_is_valid(f"a{chr(code)}b")]
    assert taken == list(range(ord(" "), ord("~") + 1))
    assert not key_is_valid("a\u00e9b")
    assert not key_is_valid("a\U0001f600b")


def test_a_request_fingerprint_separates_its_parts() -> None:
    assert fingerprint("POST", "/v1/a", b"", b"bc") != fingerprint("POST", "/v1/ab", b"", b"c")


@pytest.mark.parametrize(
    ("status", "stored"),
    [(200, True), (404, True), (409, True), (400, False), (401, False), (429, False), (503, False)],
)
def test_only_answers_of_requests_that_ran_are_stored(status: int, stored: bool) -> None:
    assert is_storable(status) is stored
