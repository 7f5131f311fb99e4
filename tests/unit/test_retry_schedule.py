"""The retry schedule as data: jitter bounds, and a delivery that is dropped, never looped."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from relay.events.models import DeliveryStatus
from relay.events.schedule import JITTER, after_attempt, max_attempts, retry_delay

SCHEDULE = (10.0, 60.0, 300.0)
NOW = datetime(2026, 11, 21, tzinfo=UTC)


def test_the_default_schedule_allows_the_first_attempt_and_three_retries() -> None:
    assert max_attempts(SCHEDULE) == 4


@pytest.mark.parametrize(("chance", "factor"), [(0.0, 1 - JITTER), (0.5, 1.0), (0.9999999, 1.1)])
def test_jitter_moves_each_delay_by_at_most_ten_percent(chance: float, factor: float) -> None:
    for retry, base in enumerate(SCHEDULE, start=1):
        assert retry_delay(retry, SCHEDULE, random=lambda: chance) == pytest.approx(base * factor)


def test_jittered_delays_stay_in_bounds_and_keep_their_order_for_any_draw() -> None:
    draw = random.Random(20261121).random
    for _ in range(1000):
        delays = [retry_delay(n, SCHEDULE, random=draw) for n in (1, 2, 3)]
        for delay, base in zip(delays, SCHEDULE, strict=True):
            assert base * 0.9 <= delay <= base * 1.1
        assert delays == sorted(delays)


def test_a_success_is_delivered_whatever_the_attempt() -> None:
    for number in (1, 4):
        following = after_attempt(
            ok=True, number=number, schedule=SCHEDULE, now=NOW, random=lambda: 0.5
        )
        assert (following.status, following.attempt_at) == (DeliveryStatus.DELIVERED, None)


def test_each_failure_before_the_last_schedules_the_next_retry_from_now() -> None:
    for number, base in enumerate(SCHEDULE, start=1):
        following = after_attempt(
            ok=False, number=number, schedule=SCHEDULE, now=NOW, random=lambda: 0.5
        )
        assert following.status is DeliveryStatus.PENDING
        assert following.attempt_at == NOW + timedelta(seconds=base)


def test_the_failure_of_the_last_retry_drops_the_delivery() -> None:
    for number in (4, 5, 99):  # a claim past the end (a crash-looping row) drops too
        following = after_attempt(
            ok=False, number=number, schedule=SCHEDULE, now=NOW, random=lambda: 0.5
        )
        assert (following.status, following.attempt_at) == (DeliveryStatus.DROPPED, None)


def test_an_empty_schedule_means_one_attempt_and_no_retry() -> None:
    following = after_attempt(ok=False, number=1, schedule=(), now=NOW, random=lambda: 0.5)
    assert following.status is DeliveryStatus.DROPPED
